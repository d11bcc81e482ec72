#pragma once
// How every test reads an owner's `verify()`: the lines joined, so a failing check prints what broke.

#include <string>

namespace test_verify {

/// `owner.verify()` joined, one broken invariant per line; empty when healthy.
template <class Owner>
std::string broken(const Owner& owner) {
    std::string out;
    for (const std::string& line : owner.verify()) out += line + "\n";
    return out;
}

}  // namespace test_verify
