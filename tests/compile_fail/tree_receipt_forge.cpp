// expect: ReceiptAccess::make.*is private within this context
// Only the tree cores make receipts: a forged one could release locks another request holds.
#include <unikv/tree/radix_tree.hpp>

int main() {
    unikv::RadixTree<unikv::Full> tree{unikv::TreeConfig{}};
#ifdef UNIKV_COMPILE_FAIL_CONTROL
    unikv::LockReceipt receipt = tree.lock(unikv::NodeRef{});
#else
    unikv::LockReceipt receipt = unikv::detail::ReceiptAccess::make(1, unikv::NodeRef{}, unikv::Tier::device,
                                                                    unikv::ComponentMask::all(), 0);
#endif
    tree.unlock(std::move(receipt));
}
