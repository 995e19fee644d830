# Conan build module for disttrain (see conanfile.py, package_info): Conan's
# CMakeDeps creates disttrain::disttrain / mpi / nccl / kernels from the
# recipe's components; the system libraries that Conan does not package here
# (MPI, CUDA runtime, NCCL) are found and linked by this file, which CMakeDeps
# includes right after creating the targets.
if(TARGET disttrain::mpi)
  find_package(MPI REQUIRED COMPONENTS CXX)
  set_property(TARGET disttrain::mpi APPEND PROPERTY INTERFACE_LINK_LIBRARIES MPI::MPI_CXX)
endif()
if(TARGET disttrain::nccl OR TARGET disttrain::kernels)
  find_package(CUDAToolkit REQUIRED)
endif()
if(TARGET disttrain::nccl)
  set(_disttrain_saved_module_path "${CMAKE_MODULE_PATH}")
  list(PREPEND CMAKE_MODULE_PATH "${CMAKE_CURRENT_LIST_DIR}")
  find_package(NCCL REQUIRED)
  set(CMAKE_MODULE_PATH "${_disttrain_saved_module_path}")
  unset(_disttrain_saved_module_path)
  set_property(TARGET disttrain::nccl APPEND PROPERTY INTERFACE_LINK_LIBRARIES NCCL::NCCL CUDA::cudart)
endif()
if(TARGET disttrain::kernels)
  set_property(TARGET disttrain::kernels APPEND PROPERTY INTERFACE_LINK_LIBRARIES CUDA::cudart)
endif()

# Core and component dependencies: already defined when they came from Conan
# packages (the generated config found them first); found on the system when
# the profile lists them under [platform_requires]. The core needs
# nlohmann_json only; Eigen goes to disttrain::calibration, fmt to
# disttrain::format (when the package was created with them).
if(NOT TARGET nlohmann_json::nlohmann_json)
  find_package(nlohmann_json 3.10 REQUIRED)
endif()
if(NOT TARGET Threads::Threads)
  find_package(Threads REQUIRED)
endif()
set_property(TARGET disttrain::disttrain APPEND PROPERTY INTERFACE_LINK_LIBRARIES
             nlohmann_json::nlohmann_json Threads::Threads)
if(TARGET disttrain::calibration)
  if(NOT TARGET Eigen3::Eigen)
    find_package(Eigen3 3.4 REQUIRED NO_MODULE)
  endif()
  set_property(TARGET disttrain::calibration APPEND PROPERTY INTERFACE_LINK_LIBRARIES Eigen3::Eigen)
endif()
if(TARGET disttrain::format)
  if(NOT TARGET fmt::fmt)
    find_package(fmt 9 REQUIRED)
  endif()
  set_property(TARGET disttrain::format APPEND PROPERTY INTERFACE_LINK_LIBRARIES fmt::fmt)
endif()
