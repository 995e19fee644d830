# Install rules: headers, exported targets (one export set per component, so
# find_package loads exactly the components asked for), the package config
# with components, a version file, FindNCCL.cmake and a pkg-config file.
#
# Layout (relative to CMAKE_INSTALL_PREFIX):
#   include/disttrain/...                 headers
#   <DISTTRAIN_INSTALL_CMAKEDIR>/         disttrainConfig.cmake, version, targets, FindNCCL.cmake
#   <DISTTRAIN_INSTALL_PKGCONFIGDIR>/     disttrain.pc, disttrain-calibration.pc, disttrain-format.pc
#   lib/libdisttrain_kernels.a            only with DISTTRAIN_ENABLE_CUDA and kernels/*.cu
#   bin/<tools>                           when tools are built
# Everything is relocatable (no absolute paths are written).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(DISTTRAIN_INSTALL_CMAKEDIR "${CMAKE_INSTALL_DATADIR}/cmake/disttrain" CACHE STRING
    "Where disttrainConfig.cmake is installed, relative to the prefix (vcpkg uses share/disttrain)")
set(DISTTRAIN_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_DATADIR}/pkgconfig" CACHE STRING
    "Where disttrain.pc is installed, relative to the prefix")

# ---- Headers ------------------------------------------------------------------
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/disttrain"
        DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}"
        COMPONENT disttrain_headers
        FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h" PATTERN "*.inl" PATTERN "*.cuh")

# ---- Targets: core plus one export set per built component --------------------
install(TARGETS disttrain EXPORT disttrainTargets)
install(EXPORT disttrainTargets NAMESPACE disttrain::
        DESTINATION "${DISTTRAIN_INSTALL_CMAKEDIR}")

set(DISTTRAIN_BUILT_COMPONENTS)
set(_disttrain_component_targets calibration disttrain_calibration format disttrain_format
                                 mpi disttrain_mpi nccl disttrain_nccl cuda disttrain_kernels)
while(_disttrain_component_targets)
  list(POP_FRONT _disttrain_component_targets _comp _target)
  if(NOT TARGET ${_target})
    continue()
  endif()
  list(APPEND DISTTRAIN_BUILT_COMPONENTS ${_comp})
  install(TARGETS ${_target} EXPORT disttrain-${_comp}-targets
          ARCHIVE DESTINATION "${CMAKE_INSTALL_LIBDIR}"
          LIBRARY DESTINATION "${CMAKE_INSTALL_LIBDIR}")
  install(EXPORT disttrain-${_comp}-targets NAMESPACE disttrain::
          DESTINATION "${DISTTRAIN_INSTALL_CMAKEDIR}")
endwhile()
if(DISTTRAIN_BUILT_COMPONENTS)
  list(JOIN DISTTRAIN_BUILT_COMPONENTS ", " DISTTRAIN_BUILT_COMPONENTS_TEXT)
else()
  set(DISTTRAIN_BUILT_COMPONENTS_TEXT "none")
endif()

# Kernels' own headers, if the kernels part keeps them under kernels/include.
if(TARGET disttrain_kernels AND IS_DIRECTORY "${PROJECT_SOURCE_DIR}/kernels/include")
  install(DIRECTORY "${PROJECT_SOURCE_DIR}/kernels/include/"
          DESTINATION "${CMAKE_INSTALL_INCLUDEDIR}")
endif()

# ---- Package config, version file, FindNCCL ----------------------------------
configure_package_config_file(
  "${PROJECT_SOURCE_DIR}/cmake/disttrainConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/disttrainConfig.cmake"
  INSTALL_DESTINATION "${DISTTRAIN_INSTALL_CMAKEDIR}")
# A header-only package does not depend on the consumer's pointer size; with the
# CUDA kernels library it does.
if(TARGET disttrain_kernels)
  set(_disttrain_arch_independent)
else()
  set(_disttrain_arch_independent ARCH_INDEPENDENT)
endif()
write_basic_package_version_file(
  "${PROJECT_BINARY_DIR}/disttrainConfigVersion.cmake"
  VERSION "${PROJECT_VERSION}"
  COMPATIBILITY SameMajorVersion
  ${_disttrain_arch_independent})
install(FILES
  "${PROJECT_BINARY_DIR}/disttrainConfig.cmake"
  "${PROJECT_BINARY_DIR}/disttrainConfigVersion.cmake"
  "${PROJECT_SOURCE_DIR}/cmake/FindNCCL.cmake"
  DESTINATION "${DISTTRAIN_INSTALL_CMAKEDIR}")

# ---- pkg-config (relocatable: prefix is computed from the .pc file's place) ---
file(RELATIVE_PATH DISTTRAIN_PC_PREFIX_FROM_PCDIR
     "/prefix/${DISTTRAIN_INSTALL_PKGCONFIGDIR}" "/prefix")
string(REGEX REPLACE "/$" "" DISTTRAIN_PC_PREFIX_FROM_PCDIR "${DISTTRAIN_PC_PREFIX_FROM_PCDIR}")
# disttrain.pc is the core; the header-only components have their own files
# (pkg-config --cflags --libs disttrain disttrain-format).
set(_disttrain_pc_files disttrain)
set(DISTTRAIN_PC_NAME "disttrain")
set(DISTTRAIN_PC_DESCRIPTION "${PROJECT_DESCRIPTION} (header-only C++20; compile with -std=c++20)")
set(DISTTRAIN_PC_REQUIRES "nlohmann_json >= 3.10")
set(DISTTRAIN_PC_LIBS "Libs: -pthread")
configure_file("${PROJECT_SOURCE_DIR}/cmake/disttrain.pc.in" "${PROJECT_BINARY_DIR}/disttrain.pc" @ONLY)
foreach(_comp_req "calibration|eigen3 >= 3.4|Eigen" "format|fmt >= 9|fmt")
  string(REPLACE "|" ";" _comp_req "${_comp_req}")
  list(GET _comp_req 0 _comp)
  if(NOT TARGET disttrain_${_comp})
    continue()
  endif()
  list(GET _comp_req 1 _req)
  list(GET _comp_req 2 _dep)
  set(DISTTRAIN_PC_NAME "disttrain-${_comp}")
  set(DISTTRAIN_PC_DESCRIPTION "disttrain's ${_comp} component (disttrain::${_comp}; uses ${_dep})")
  set(DISTTRAIN_PC_REQUIRES "disttrain = ${PROJECT_VERSION}, ${_req}")
  set(DISTTRAIN_PC_LIBS "")
  configure_file("${PROJECT_SOURCE_DIR}/cmake/disttrain.pc.in"
                 "${PROJECT_BINARY_DIR}/disttrain-${_comp}.pc" @ONLY)
  list(APPEND _disttrain_pc_files disttrain-${_comp})
endforeach()
foreach(_pc IN LISTS _disttrain_pc_files)
  install(FILES "${PROJECT_BINARY_DIR}/${_pc}.pc" DESTINATION "${DISTTRAIN_INSTALL_PKGCONFIGDIR}")
endforeach()

# ---- License ------------------------------------------------------------------
if(EXISTS "${PROJECT_SOURCE_DIR}/LICENSE")
  install(FILES "${PROJECT_SOURCE_DIR}/LICENSE" DESTINATION "${CMAKE_INSTALL_DATADIR}/doc/disttrain")
endif()

unset(_comp)
unset(_comp_req)
unset(_req)
unset(_dep)
unset(_pc)
unset(_disttrain_pc_files)
unset(_target)
unset(_disttrain_component_targets)
unset(_disttrain_arch_independent)
