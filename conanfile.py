"""Conan 2 recipe for disttrain (header-only C++20; optional CUDA kernels library).

Components: core (disttrain::disttrain, needs nlohmann_json), calibration
(disttrain::calibration, Eigen; option with_calibration), format
(disttrain::format, fmt; option with_format), mpi, nccl, cuda.

Offline use with the system's nlohmann_json, Eigen and fmt:
    conan profile detect --exist-ok
    conan create . -pr:a .ci/conan/profile --build=missing
"""
import os
import re

from conan import ConanFile
from conan.errors import ConanInvalidConfiguration
from conan.tools.build import check_min_cppstd
from conan.tools.cmake import CMake, CMakeDeps, CMakeToolchain, cmake_layout
from conan.tools.files import copy, load, rmdir

required_conan_version = ">=2.0"


class DisttrainConan(ConanFile):
    name = "disttrain"
    description = ("Header-only C++20 primitives for disaggregated training of multimodal "
                   "LLMs: planning, reordering, schedules, simulation and communication")
    license = "Apache-2.0"
    topics = ("distributed-training", "llm", "multimodal", "pipeline-parallelism", "header-only")
    package_type = "header-library"
    settings = "os", "arch", "compiler", "build_type"
    options = {
        "with_calibration": [True, False],
        "with_format": [True, False],
        "with_mpi": [True, False],
        "with_cuda": [True, False],
        "with_nccl": [True, False],
    }
    default_options = {"with_calibration": True, "with_format": True, "with_mpi": False,
                       "with_cuda": False, "with_nccl": False}
    exports_sources = ("CMakeLists.txt", "LICENSE", "cmake/*", "include/*", "kernels/*")
    no_copy_source = True

    def set_version(self):
        text = load(self, os.path.join(self.recipe_folder, "CMakeLists.txt"))
        self.version = re.search(r"project\(disttrain\s+VERSION\s+([0-9.]+)", text).group(1)

    def configure(self):
        # Only the CUDA kernels make a compiled library; otherwise header-only.
        if self.options.with_cuda:
            self.package_type = "static-library"

    def layout(self):
        cmake_layout(self)

    def requirements(self):
        # transitive_headers: disttrain's public headers include these.
        self.requires("nlohmann_json/[>=3.10 <4]", transitive_headers=True)
        if self.options.with_calibration:
            self.requires("eigen/[>=3.4 <4]", transitive_headers=True)
        if self.options.with_format:
            self.requires("fmt/[>=9 <12]", transitive_headers=True)

    def validate(self):
        if self.settings.compiler.get_safe("cppstd"):
            check_min_cppstd(self, 20)
        if (self.options.with_cuda or self.options.with_nccl) and self.settings.os != "Linux":
            raise ConanInvalidConfiguration("disttrain's CUDA/NCCL support is Linux-only")

    def package_id(self):
        # Header-only: one package for every configuration. The options only
        # choose which components package_info declares (system MPI/NCCL are
        # found by the build module at the consumer), not the package contents.
        if not self.info.options.with_cuda:
            self.info.clear()

    def generate(self):
        tc = CMakeToolchain(self)
        tc.cache_variables["DISTTRAIN_BUILD_TESTS"] = False
        tc.cache_variables["DISTTRAIN_BUILD_BENCHMARKS"] = False
        tc.cache_variables["DISTTRAIN_BUILD_EXAMPLES"] = False
        tc.cache_variables["DISTTRAIN_INSTALL"] = True
        tc.cache_variables["DISTTRAIN_WARNINGS_AS_ERRORS"] = False
        tc.cache_variables["DISTTRAIN_ENABLE_CALIBRATION"] = bool(self.options.with_calibration)
        tc.cache_variables["DISTTRAIN_ENABLE_FORMAT"] = bool(self.options.with_format)
        tc.cache_variables["DISTTRAIN_ENABLE_MPI"] = bool(self.options.with_mpi)
        tc.cache_variables["DISTTRAIN_ENABLE_CUDA"] = bool(self.options.with_cuda)
        tc.cache_variables["DISTTRAIN_ENABLE_NCCL"] = bool(self.options.with_nccl)
        tc.generate()
        CMakeDeps(self).generate()

    def build(self):
        cmake = CMake(self)
        cmake.configure()
        cmake.build()

    def package(self):
        copy(self, "LICENSE", src=self.source_folder, dst=os.path.join(self.package_folder, "licenses"))
        CMake(self).install()
        # Conan generates its own CMake config (CMakeDeps) from package_info;
        # keep only the build module and FindNCCL.cmake it uses.
        rmdir(self, os.path.join(self.package_folder, "share"))
        module_dir = os.path.join(self.package_folder, "lib", "cmake", "disttrain-conan")
        copy(self, "disttrainConanSystemDeps.cmake", src=os.path.join(self.source_folder, "cmake"),
             dst=module_dir)
        copy(self, "FindNCCL.cmake", src=os.path.join(self.source_folder, "cmake"), dst=module_dir)

    def _is_platform(self, name):
        # Platform requirements are not part of self.dependencies.
        try:
            dep = self.dependencies[name]
        except KeyError:
            return True
        return dep.ref.revision == "platform"

    def package_info(self):
        self.cpp_info.set_property("cmake_file_name", "disttrain")
        # The aggregate target; consumers use the component targets below.
        self.cpp_info.set_property("cmake_target_name", "disttrain::all")
        self.cpp_info.set_property("pkg_config_name", "disttrain")
        build_module = os.path.join("lib", "cmake", "disttrain-conan", "disttrainConanSystemDeps.cmake")
        self.cpp_info.set_property("cmake_build_modules", [build_module])
        self.cpp_info.builddirs = [os.path.join("lib", "cmake", "disttrain-conan")]

        core = self.cpp_info.components["core"]
        core.set_property("cmake_target_name", "disttrain::disttrain")
        core.includedirs = ["include"]
        core.libdirs = []
        core.bindirs = []
        # Dependencies that came from ConanCenter are Conan requirements of the
        # component; those taken from the system ([platform_requires] in the
        # profile) have no Conan package, so the build module finds them with
        # find_package() at the consumer instead (it does so in both cases).
        if not self._is_platform("nlohmann_json"):
            core.requires.append("nlohmann_json::nlohmann_json")
        if self.settings.os in ("Linux", "FreeBSD"):
            core.system_libs = ["pthread", "m"]

        # Header-only components with one dependency each (found like the core's).
        for comp, dep, enabled in (("calibration", "eigen", self.options.with_calibration),
                                   ("format", "fmt", self.options.with_format)):
            if not enabled:
                continue
            c = self.cpp_info.components[comp]
            c.set_property("cmake_target_name", f"disttrain::{comp}")
            c.requires = ["core"]
            if not self._is_platform(dep):
                c.requires.append(f"{dep}::{dep}")
            c.libdirs = []
            c.bindirs = []

        if self.options.with_mpi:
            mpi = self.cpp_info.components["mpi"]
            mpi.set_property("cmake_target_name", "disttrain::mpi")
            mpi.requires = ["core"]
            mpi.defines = ["DISTTRAIN_HAS_MPI=1"]
            mpi.libdirs = []
            mpi.bindirs = []
        if self.options.with_nccl:
            nccl = self.cpp_info.components["nccl"]
            nccl.set_property("cmake_target_name", "disttrain::nccl")
            nccl.requires = ["core"]
            nccl.defines = ["DISTTRAIN_HAS_NCCL=1"]
            nccl.libdirs = []
            nccl.bindirs = []
        if self.options.with_cuda:
            cuda = self.cpp_info.components["cuda"]
            cuda.set_property("cmake_target_name", "disttrain::kernels")
            cuda.requires = ["core"]
            cuda.bindirs = []
            if os.path.exists(os.path.join(self.package_folder, "lib", "libdisttrain_kernels.a")):
                cuda.libs = ["disttrain_kernels"]
                cuda.defines = ["DISTTRAIN_HAS_CUDA_KERNELS=1"]
            else:
                cuda.libdirs = []
