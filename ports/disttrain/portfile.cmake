# Overlay port: builds disttrain from the source tree this port lives in.
#   vcpkg install disttrain --overlay-ports=<repo>/ports            (core)
#   vcpkg install "disttrain[mpi,nccl,cuda]" --overlay-ports=<repo>/ports
# Default features: calibration (Eigen) and format (fmt); without them
# ("disttrain[core]") the package needs nlohmann-json only.
# tests/packaging/vcpkg_layout.cmake performs the same configure -> install ->
# config-fixup steps without vcpkg and builds a consumer against the result.

# disttrain is header-only unless the cuda feature builds the kernels library;
# either way one (release) build is enough.
set(VCPKG_BUILD_TYPE release)

get_filename_component(SOURCE_PATH "${CURRENT_PORT_DIR}/../.." ABSOLUTE)
if(NOT EXISTS "${SOURCE_PATH}/include/disttrain/disttrain.hpp")
  message(FATAL_ERROR "disttrain overlay port: ${SOURCE_PATH} is not a disttrain source tree")
endif()

vcpkg_check_features(OUT_FEATURE_OPTIONS FEATURE_OPTIONS
  FEATURES
    calibration DISTTRAIN_ENABLE_CALIBRATION
    format      DISTTRAIN_ENABLE_FORMAT
    mpi  DISTTRAIN_ENABLE_MPI
    cuda DISTTRAIN_ENABLE_CUDA
    nccl DISTTRAIN_ENABLE_NCCL
)

vcpkg_cmake_configure(
  SOURCE_PATH "${SOURCE_PATH}"
  OPTIONS
    ${FEATURE_OPTIONS}
    -DDISTTRAIN_BUILD_TESTS=OFF
    -DDISTTRAIN_BUILD_BENCHMARKS=OFF
    -DDISTTRAIN_BUILD_EXAMPLES=OFF
    -DDISTTRAIN_INSTALL=ON
    -DDISTTRAIN_WARNINGS_AS_ERRORS=OFF
    -DDISTTRAIN_INSTALL_CMAKEDIR=share/disttrain
)
vcpkg_cmake_install()
vcpkg_cmake_config_fixup(PACKAGE_NAME disttrain CONFIG_PATH share/disttrain)
vcpkg_fixup_pkgconfig()

# Header-only: no debug tree; without the cuda feature there is no lib/ either.
file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/debug")
if(NOT "cuda" IN_LIST FEATURES)
  file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/lib")
endif()
file(REMOVE_RECURSE "${CURRENT_PACKAGES_DIR}/share/doc")

file(INSTALL "${CMAKE_CURRENT_LIST_DIR}/usage" DESTINATION "${CURRENT_PACKAGES_DIR}/share/${PORT}")
vcpkg_install_copyright(FILE_LIST "${SOURCE_PATH}/LICENSE")
