// expect: conversion from .*physical_page_tag.* to non-scalar type .*virtual_page_tag
// A physical page passed where a virtual page is expected must not compile.
#include <unikv/ids.hpp>

void takes_virtual(unikv::VirtualPage) {}

int main() {
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    takes_virtual(unikv::VirtualPage{3});
#else
    unikv::VirtualPage v = unikv::PhysicalPage{3};
    takes_virtual(v);
#endif
}
