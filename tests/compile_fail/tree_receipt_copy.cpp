// expect: use of deleted function .*LockReceipt\(const unikv::LockReceipt&\)
// A lock receipt is move-only: copying one would allow releasing a lock twice.
#include <unikv/tree/radix_tree.hpp>

int main() {
    unikv::RadixTree<unikv::Full> tree{unikv::TreeConfig{}};
    unikv::LockReceipt receipt = tree.lock(unikv::NodeRef{});
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    unikv::LockReceipt moved = std::move(receipt);
    tree.unlock(std::move(moved));
#else
    unikv::LockReceipt copy = receipt;
    tree.unlock(std::move(copy));
#endif
}
