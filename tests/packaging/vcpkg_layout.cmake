# cmake -P vcpkg_layout.cmake: does what ports/disttrain/portfile.cmake asks
# vcpkg to do, without vcpkg, and checks the result is usable:
#   1. configure with the port's options (tests etc. off, config in
#      share/disttrain), release only, install into a "packages" prefix;
#   2. vcpkg_cmake_config_fixup / vcpkg post-build checks: config files in
#      share/disttrain, no debug/ tree, no absolute build or source paths in
#      the installed CMake and pkg-config files; copyright in share/disttrain;
#   3. vcpkg copies packages/<port> into installed/<triplet>: we copy the
#      prefix elsewhere and delete the original (proves relocatability);
#   4. build and run the find_package consumer against installed/, and
#      compile the consumer through pkg-config (vcpkg_fixup_pkgconfig layout).
#   -DSOURCE_DIR -DWORK_DIR -DGENERATOR -DCXX_COMPILER [-DFEATURES=MPI,...]
#   [-DCUDA_ARCHITECTURES=80,90] [-DPKG_CONFIG]
include("${CMAKE_CURRENT_LIST_DIR}/script_common.cmake")
disttrain_require_vars(vcpkg_layout.cmake SOURCE_DIR WORK_DIR GENERATOR)


set(packages "${WORK_DIR}/packages/disttrain_x64-linux")
set(installed "${WORK_DIR}/installed/x64-linux")
file(REMOVE_RECURSE "${WORK_DIR}/packages" "${WORK_DIR}/installed")

# 1. Same options as the portfile (feature options come in FEATURES).
execute_process(COMMAND "${CMAKE_COMMAND}"
  -DSOURCE_DIR=${SOURCE_DIR} -DBINARY_DIR=${WORK_DIR}/x64-linux-rel -DPREFIX=${packages}
  -DGENERATOR=${GENERATOR} -DCXX_COMPILER=${CXX_COMPILER} -DCUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}
  -DCUDA_COMPILER=${CUDA_COMPILER}
  -DFEATURES=${FEATURES} -DINSTALL_CMAKEDIR=share/disttrain
  -P "${CMAKE_CURRENT_LIST_DIR}/stage_install.cmake"
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configure/build/install with the port's options failed")
endif()

# 2. Layout checks and fixups.
file(REMOVE_RECURSE "${packages}/debug" "${packages}/share/doc")  # as the portfile does
foreach(f disttrainConfig.cmake disttrainConfigVersion.cmake disttrainTargets.cmake FindNCCL.cmake)
  if(NOT EXISTS "${packages}/share/disttrain/${f}")
    message(FATAL_ERROR "vcpkg layout: share/disttrain/${f} is missing")
  endif()
endforeach()
if(EXISTS "${packages}/share/cmake" OR EXISTS "${packages}/lib/cmake")
  message(FATAL_ERROR "vcpkg layout: config files left outside share/disttrain")
endif()
if(NOT EXISTS "${packages}/include/disttrain/disttrain.hpp")
  message(FATAL_ERROR "vcpkg layout: include/disttrain/disttrain.hpp is missing")
endif()
file(GLOB_RECURSE text_files "${packages}/share/*.cmake" "${packages}/share/*.pc")
foreach(f IN LISTS text_files)
  file(READ "${f}" content)
  foreach(abs "${SOURCE_DIR}" "${WORK_DIR}")
    string(FIND "${content}" "${abs}" pos)
    if(NOT pos EQUAL -1)
      message(FATAL_ERROR "vcpkg layout: ${f} contains the absolute path ${abs}")
    endif()
  endforeach()
endforeach()
file(COPY_FILE "${SOURCE_DIR}/LICENSE" "${packages}/share/disttrain/copyright")

# 3. Relocate, as vcpkg does when it installs the package.
file(MAKE_DIRECTORY "${WORK_DIR}/installed")
file(RENAME "${packages}" "${installed}")

# 4. Consumers: CMake find_package and pkg-config.
set(consumer_src "${CMAKE_CURRENT_LIST_DIR}/find_package_consumer")
set(consumer_bin "${WORK_DIR}/consumer")
file(REMOVE_RECURSE "${consumer_bin}")
set(compiler_args)
if(CXX_COMPILER)  # the consumer is C++ only
  list(APPEND compiler_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
disttrain_run("${CMAKE_COMMAND}" -S "${consumer_src}" -B "${consumer_bin}" -G "${GENERATOR}"
    ${compiler_args} -DCMAKE_BUILD_TYPE=Release
    "-DCMAKE_PREFIX_PATH=${installed}" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
    "-DDISTTRAIN_EXPECTED_DIR=${installed}/share/disttrain")
disttrain_run("${CMAKE_COMMAND}" --build "${consumer_bin}")
disttrain_run("${consumer_bin}/consumer")

if(PKG_CONFIG AND CXX_COMPILER)
  execute_process(
    COMMAND "${CMAKE_COMMAND}" -E env "PKG_CONFIG_PATH=${installed}/share/pkgconfig"
            "${PKG_CONFIG}" --cflags --libs disttrain
    OUTPUT_VARIABLE pc_flags OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config --cflags --libs disttrain failed")
  endif()
  message(STATUS "pkg-config flags: ${pc_flags}")
  separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
  disttrain_run("${CXX_COMPILER}" -std=c++20 "${consumer_src}/main.cpp" ${pc_flags}
      -o "${WORK_DIR}/consumer_pkgconfig")
  disttrain_run("${WORK_DIR}/consumer_pkgconfig")
  # The components' .pc files (the port builds both by default).
  foreach(comp calibration format)
    execute_process(
      COMMAND "${CMAKE_COMMAND}" -E env "PKG_CONFIG_PATH=${installed}/share/pkgconfig"
              "${PKG_CONFIG}" --cflags --libs disttrain-${comp}
      OUTPUT_VARIABLE pc_flags OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "pkg-config --cflags --libs disttrain-${comp} failed")
    endif()
    message(STATUS "pkg-config flags (${comp}): ${pc_flags}")
    separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
    disttrain_run("${CXX_COMPILER}" -std=c++20 "${consumer_src}/main_${comp}.cpp" ${pc_flags}
        -o "${WORK_DIR}/consumer_pkgconfig_${comp}")
    disttrain_run("${WORK_DIR}/consumer_pkgconfig_${comp}")
  endforeach()
endif()
message(STATUS "vcpkg layout: OK")
