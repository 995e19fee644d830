// disttrain._core's second translation unit: the topology and the bound
// per-rank programs (program_ext.cpp), added to the module by NB_MODULE in
// disttrain_ext.cpp.
#pragma once
#include <nanobind/nanobind.h>

void add_program_bindings(nanobind::module_& m);
