#pragma once
// The work of one RedisClusterStorage lane: a client of the whole cluster that runs one batch at a time. It keeps
// the slot map (from CLUSTER SLOTS), one connection per node (`redis_connection.hpp`), and runs a batch in rounds:
// each round sends every node its objects' commands as one pipeline and reads the replies of all nodes at once
// (one poll loop), so a batch costs one round trip per node, the nodes working in parallel. Replies that redirect
// (MOVED: the slot has a new owner, the map is refreshed; ASK: a slot being migrated, ASKING on the named node)
// send their objects to a next round, at most `max_redirects` times. A node that cannot be reached, closes the
// connection or stays silent past `command_timeout` fails its unanswered objects (`error`) and is not dialled
// again before its backoff (doubling from `backoff_initial` up to `backoff_max`) has passed.

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/uio.h>

#include <unikv/detail/storage/redis_connection.hpp>
#include <unikv/detail/storage/redis_slots.hpp>
#include <unikv/storage/page_object.hpp>
#include <unikv/storage/storage_concept.hpp>

namespace unikv::detail::storage {

// How a lane's client talks to the cluster: RedisClusterStorageConfig, checked and parsed.
struct redis_client_options {
    std::vector<redis_endpoint> seeds{};
    std::string key_prefix{};
    std::chrono::milliseconds connect_timeout{};
    std::chrono::milliseconds command_timeout{};
    std::chrono::milliseconds round_timeout{};
    std::chrono::milliseconds backoff_initial{};
    std::chrono::milliseconds backoff_max{};
    std::uint32_t max_redirects = 0;
    std::size_t max_batch = 0;
};

// Bytes of an object's Redis key: the prefix, then the 128-bit key in 32 lowercase hex digits.
[[nodiscard]] inline std::size_t redis_name_bytes(std::string_view prefix) noexcept { return prefix.size() + 32; }

// Writes the Redis key of `key` (`redis_name_bytes(prefix)` bytes) to `out`.
inline void redis_write_name(std::string_view prefix, ObjectKey key, char* out) noexcept {
    static constexpr char digits[] = "0123456789abcdef";
    out = std::copy(prefix.begin(), prefix.end(), out);
    for (const std::uint64_t word : {key.high, key.low})
        for (int shift = 60; shift >= 0; shift -= 4) *out++ = digits[(word >> shift) & 0xf];
}

// One object of a batch, as a lane sees it.
struct redis_item {
    ObjectKey key{};
    ObjectKind kind = ObjectKind::full;
    std::byte* data = nullptr;  // get: the caller's buffer; put: its payload (only read)
    std::size_t size = 0;
    PageResult result = PageResult::error;  // error until a reply says otherwise
    bool corrupt = false;                   // get: found, failing its checks
    bool written = false;                   // put: stored by this call (not held before)
    std::uint16_t slot = 0;
    std::int32_t ask_node = -1;  // the node an ASK redirect named for the next round; -1 none
    std::uint32_t redirects = 0;
    alignas(8) std::byte header[object_header_bytes] = {};  // put: the stored header; get: the one read back
};

struct redis_batch {
    StorageTicket ticket{};
    StorageOp op = StorageOp::get;
    std::vector<redis_item> items;
    std::vector<PageResult> results;
    std::string names;  // the items' Redis keys, made on the lane
};

enum class redis_command : std::uint8_t { exists, get, set_nx, del };

class redis_cluster_client {
public:
    explicit redis_cluster_client(redis_client_options options) : options_(std::move(options)), owner_(redis_slot_count, -1) {
        for (const redis_endpoint& at : options_.seeds) (void)node_of(at);
        inbox_.resize(64 << 10);
    }
    redis_cluster_client(const redis_cluster_client&) = delete;
    redis_cluster_client& operator=(const redis_cluster_client&) = delete;

    // Runs batch `b` to completion: every item gets its result (and a get's payload its buffer). Never throws for
    // the cluster's sake. Bounded: at most `max_redirects + 1` rounds per `max_batch` objects, each round at most
    // one connect per node plus `round_timeout`, and each slot-map refresh a few nodes' connect and command time.
    void run(redis_batch& b) {
        // hiredis sends the administrative commands with write(2): a node gone since must make that EPIPE, not a
        // SIGPIPE that ends the engine. A write's SIGPIPE goes to the writing thread, so it is blocked on the
        // lane's own thread, the one that runs this (the data commands' sends ask for no signal themselves).
        static thread_local const bool sigpipe_blocked = [] {
            sigset_t blocked{};
            sigemptyset(&blocked);
            sigaddset(&blocked, SIGPIPE);
            return ::pthread_sigmask(SIG_BLOCK, &blocked, nullptr) == 0;
        }();
        (void)sigpipe_blocked;
        const std::size_t name_bytes = redis_name_bytes(options_.key_prefix);
        b.names.resize(b.items.size() * name_bytes);
        for (std::size_t i = 0; i < b.items.size(); ++i) {
            redis_item& it = b.items[i];
            char* name = b.names.data() + i * name_bytes;
            redis_write_name(options_.key_prefix, it.key, name);
            it.slot = redis_key_slot({name, name_bytes});
            it.result = PageResult::error;
            it.corrupt = false;
            it.written = false;
            it.ask_node = -1;
            it.redirects = 0;
            if (b.op == StorageOp::put)  // off the driving thread: the checksum reads the whole payload
                store_header(make_header(it.key, it.kind, {it.data, it.size}),
                             std::span<std::byte, object_header_bytes>(it.header));
        }
        const redis_command command = b.op == StorageOp::exists ? redis_command::exists
                                      : b.op == StorageOp::get  ? redis_command::get
                                                                : redis_command::set_nx;
        for (std::size_t first = 0; first < b.items.size(); first += options_.max_batch) {
            const std::size_t last = std::min(b.items.size(), first + options_.max_batch);
            todo_.clear();
            for (std::size_t i = first; i < last; ++i) todo_.push_back(static_cast<std::uint32_t>(i));
            for (std::uint32_t attempt = 0; !todo_.empty() && attempt <= options_.max_redirects; ++attempt) {
                refresh_if_due();
                retry_.clear();
                round(b, todo_, command);
                todo_.swap(retry_);
            }
        }
        if (command != redis_command::get) return;
        // A corrupt object is removed, so that the next put of its key stores it again (SET NX would keep it).
        todo_.clear();
        for (std::size_t i = 0; i < b.items.size(); ++i)
            if (b.items[i].corrupt) todo_.push_back(static_cast<std::uint32_t>(i));
        if (!todo_.empty()) round(b, todo_, redis_command::del);
    }

private:
    struct expected {
        std::uint32_t item = 0;
        bool asking = false;  // the +OK of an ASKING before the item's command
    };
    // A stretch of a node's pipeline: `size` bytes at `data`, or at `offset` in its `text` when `data` is null.
    struct piece {
        const std::byte* data = nullptr;
        std::size_t offset = 0;
        std::size_t size = 0;
    };
    struct node {
        redis_endpoint at;
        redis_connection connection;
        std::uint32_t failures = 0;         // consecutive failures: the backoff's exponent
        redis_clock::time_point retry_at{};  // not dialled before this
        // The round in progress.
        bool used = false;  // has commands in it
        bool down = false;  // failed in it
        std::string text;
        std::vector<piece> pieces;
        std::vector<iovec> out;
        std::size_t out_next = 0;  // first iovec not wholly sent
        std::vector<expected> replies;
        std::size_t answered = 0;
        redis_clock::time_point progress{};  // the last byte sent or received
    };

    // ---- nodes and the slot map ---------------------------------------------------------------------------
    std::int32_t node_of(const redis_endpoint& at) {
        for (std::size_t i = 0; i < nodes_.size(); ++i)
            if (nodes_[i]->at == at) return static_cast<std::int32_t>(i);
        nodes_.push_back(std::make_unique<node>());
        nodes_.back()->at = at;
        return static_cast<std::int32_t>(nodes_.size() - 1);
    }
    // The node's connection, opened when it is not and its backoff has passed; false when it cannot be had.
    bool connect(node& n) {
        if (n.connection.is_open()) return true;
        if (redis_clock::now() < n.retry_at) return false;
        if (n.connection.open(n.at, options_.connect_timeout, options_.command_timeout)) return true;
        mark_failed(n);
        return false;
    }
    void mark_failed(node& n) {
        n.connection.close();
        n.down = true;
        n.failures = std::min<std::uint32_t>(n.failures + 1, 30);
        const long long doubling = 1ll << std::min<std::uint32_t>(n.failures - 1, 20);
        const auto delay = std::min<std::chrono::milliseconds>(options_.backoff_initial * doubling, options_.backoff_max);
        n.retry_at = redis_clock::now() + delay;
        map_stale_ = true;  // the node may have been replaced (a failover)
    }
    void refresh_if_due() {
        if (map_known_ && !map_stale_) return;
        if (map_known_ && redis_clock::now() < next_refresh_) return;
        refresh();
    }
    // Asks CLUSTER SLOTS of the nodes connected first, then the others (the seeds among them), until one answers;
    // at most `refresh_tries` nodes are asked.
    void refresh() {
        static constexpr int refresh_tries = 5;
        next_refresh_ = redis_clock::now() + options_.backoff_initial;
        order_.clear();
        for (std::size_t i = 0; i < nodes_.size(); ++i)
            if (nodes_[i]->connection.is_open()) order_.push_back(static_cast<std::uint32_t>(i));
        for (std::size_t i = 0; i < nodes_.size(); ++i)
            if (!nodes_[i]->connection.is_open()) order_.push_back(static_cast<std::uint32_t>(i));
        int tries = 0;
        for (const std::uint32_t i : order_) {
            if (tries == refresh_tries) return;
            node& n = *nodes_[i];
            if (!connect(n)) continue;
            ++tries;
            if (load_slots(n)) {
                map_known_ = true;
                map_stale_ = false;
                return;
            }
        }
    }
    bool load_slots(node& n) {
        static constexpr std::string_view words[2] = {"CLUSTER", "SLOTS"};
        const redis_reply_ptr reply = n.connection.command(words);
        if (reply == nullptr) {
            mark_failed(n);
            return false;
        }
        if (reply->type != REDIS_REPLY_ARRAY) return false;
        fresh_.assign(redis_slot_count, -1);
        for (std::size_t r = 0; r < reply->elements; ++r) {
            const redisReply* range = reply->element[r];
            if (range->type != REDIS_REPLY_ARRAY || range->elements < 3) return false;
            const redisReply* first = range->element[0];
            const redisReply* last = range->element[1];
            const redisReply* master = range->element[2];
            if (first->type != REDIS_REPLY_INTEGER || last->type != REDIS_REPLY_INTEGER || master->type != REDIS_REPLY_ARRAY ||
                master->elements < 2 || master->element[0]->type != REDIS_REPLY_STRING ||
                master->element[1]->type != REDIS_REPLY_INTEGER)
                return false;
            redis_endpoint at{.host = std::string(master->element[0]->str, master->element[0]->len),
                              .port = static_cast<int>(master->element[1]->integer)};
            if (at.host.empty() || at.host == "?") at.host = n.at.host;  // "the address you reached me at"
            const std::int32_t owner = node_of(at);
            for (long long s = std::max(0ll, first->integer); s <= std::min<long long>(last->integer, redis_slot_count - 1); ++s)
                fresh_[static_cast<std::size_t>(s)] = owner;
        }
        owner_.swap(fresh_);
        return true;
    }

    // ---- one round ----------------------------------------------------------------------------------------
    void add_text(node& n, std::string_view words) {
        piece* last = n.pieces.empty() ? nullptr : &n.pieces.back();
        if (last != nullptr && last->data == nullptr && last->offset + last->size == n.text.size())
            last->size += words.size();
        else
            n.pieces.push_back({.data = nullptr, .offset = n.text.size(), .size = words.size()});
        n.text.append(words);
    }
    void add_bulk_length(node& n, std::size_t bytes) {
        char digits[24] = {'$'};
        const auto end = std::to_chars(digits + 1, digits + sizeof digits - 2, bytes).ptr;
        end[0] = '\r';
        end[1] = '\n';
        add_text(n, {digits, static_cast<std::size_t>(end + 2 - digits)});
    }
    void add_command(node& n, const redis_batch& b, std::uint32_t i, redis_command command) {
        const std::size_t name_bytes = redis_name_bytes(options_.key_prefix);
        const std::string_view name(b.names.data() + i * name_bytes, name_bytes);
        switch (command) {
            case redis_command::exists: add_text(n, "*2\r\n$6\r\nEXISTS\r\n"); break;
            case redis_command::get: add_text(n, "*2\r\n$3\r\nGET\r\n"); break;
            case redis_command::del: add_text(n, "*2\r\n$3\r\nDEL\r\n"); break;
            case redis_command::set_nx: add_text(n, "*4\r\n$3\r\nSET\r\n"); break;
        }
        add_bulk_length(n, name.size());
        add_text(n, name);
        add_text(n, "\r\n");
        if (command != redis_command::set_nx) return;
        // The value goes from the item's header and the caller's payload as they are (no copy into a buffer).
        const redis_item& it = b.items[i];
        add_bulk_length(n, object_header_bytes + it.size);
        n.pieces.push_back({.data = it.header, .offset = 0, .size = object_header_bytes});
        if (it.size > 0) n.pieces.push_back({.data = it.data, .offset = 0, .size = it.size});
        add_text(n, "\r\n$2\r\nNX\r\n");
    }

    void round(redis_batch& b, std::span<const std::uint32_t> items, redis_command command) {
        active_.clear();
        for (const auto& p : nodes_) {
            node& n = *p;
            n.used = n.down = false;
            n.text.clear();
            n.pieces.clear();
            n.out.clear();
            n.out_next = 0;
            n.replies.clear();
            n.answered = 0;
        }
        for (const std::uint32_t i : items) {
            redis_item& it = b.items[i];
            const bool asking = it.ask_node >= 0;
            const std::int32_t target = asking ? it.ask_node : owner_[it.slot];
            it.ask_node = -1;
            if (target < 0) continue;  // no node is known to serve its slot: it stays an error
            node& n = *nodes_[static_cast<std::size_t>(target)];
            if (!n.used) {
                n.used = true;
                if (connect(n))
                    active_.push_back(static_cast<std::uint32_t>(target));
                else
                    n.down = true;
            }
            if (n.down) continue;
            if (asking) {
                add_text(n, "*1\r\n$6\r\nASKING\r\n");
                n.replies.push_back({.item = i, .asking = true});
            }
            add_command(n, b, i, command);
            n.replies.push_back({.item = i, .asking = false});
        }
        for (const std::uint32_t a : active_) {
            node& n = *nodes_[a];
            for (const piece& p : n.pieces) {
                const void* base = p.data != nullptr ? static_cast<const void*>(p.data) : n.text.data() + p.offset;
                n.out.push_back({const_cast<void*>(base), p.size});  // sendmsg only reads
            }
            expect_next(b, n, command);
        }
        exchange(b, command);
    }

    // Sets the sink up for node `n`'s next reply: a GET's value goes straight to its item.
    void expect_next(redis_batch& b, node& n, redis_command command) {
        if (n.answered == n.replies.size()) return;
        const expected& e = n.replies[n.answered];
        redis_item& it = b.items[e.item];
        if (command == redis_command::get && !e.asking)
            n.connection.sink().expect(it.header, it.data, it.size);
        else
            n.connection.sink().expect(nullptr, nullptr, 0);
    }

    // Sends every active node its pipeline and reads its replies, all nodes at once, until each has answered
    // everything or failed (no byte moved for `command_timeout`, or the round past `round_timeout`).
    void exchange(redis_batch& b, redis_command command) {
        const redis_clock::time_point start = redis_clock::now();
        const redis_clock::time_point hard = start + options_.round_timeout;
        for (const std::uint32_t a : active_) nodes_[a]->progress = start;
        for (;;) {
            fds_.clear();
            polled_.clear();
            redis_clock::time_point now = redis_clock::now();
            redis_clock::time_point wake = hard;
            for (const std::uint32_t a : active_) {
                node& n = *nodes_[a];
                if (n.down || n.answered == n.replies.size()) continue;
                const redis_clock::time_point limit = std::min(n.progress + options_.command_timeout, hard);
                if (now >= limit) {
                    mark_failed(n);  // silent too long: its unanswered objects stay errors
                    continue;
                }
                wake = std::min(wake, limit);
                const short events = static_cast<short>(POLLIN | (n.out_next < n.out.size() ? POLLOUT : 0));
                fds_.push_back({.fd = n.connection.fd(), .events = events, .revents = 0});
                polled_.push_back(a);
            }
            if (fds_.empty()) return;
            const auto wait = std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
            const int ready = ::poll(fds_.data(), fds_.size(), static_cast<int>(std::max<long long>(wait, 1)));
            if (ready < 0 && errno != EINTR) {
                for (const std::uint32_t a : polled_) mark_failed(*nodes_[a]);
                return;
            }
            now = redis_clock::now();
            for (std::size_t k = 0; ready > 0 && k < fds_.size(); ++k) {
                const short events = fds_[k].revents;
                if (events == 0) continue;
                node& n = *nodes_[polled_[k]];
                if ((events & POLLNVAL) != 0) {
                    mark_failed(n);
                    continue;
                }
                if ((events & POLLOUT) != 0 && !send_some(n, now)) continue;
                if ((events & (POLLIN | POLLHUP | POLLERR)) != 0) receive_all(b, n, command, now);
            }
        }
    }
    // False when the node failed.
    bool send_some(node& n, redis_clock::time_point now) {
        static constexpr std::size_t iov_per_call = 512;
        const std::size_t count = std::min(iov_per_call, n.out.size() - n.out_next);
        long sent = n.connection.send_some(n.out.data() + n.out_next, count);
        if (sent < 0) {
            mark_failed(n);
            return false;
        }
        if (sent > 0) n.progress = now;
        auto left = static_cast<std::size_t>(sent);
        while (n.out_next < n.out.size() && left >= n.out[n.out_next].iov_len) left -= n.out[n.out_next++].iov_len;
        if (left > 0) {
            iovec& partly = n.out[n.out_next];
            partly.iov_base = static_cast<std::byte*>(partly.iov_base) + left;
            partly.iov_len -= left;
        }
        return true;
    }
    void receive_all(redis_batch& b, node& n, redis_command command, redis_clock::time_point now) {
        for (;;) {
            const long got = n.connection.receive_some(inbox_);
            if (got < 0) {
                mark_failed(n);
                return;
            }
            if (got == 0) return;
            n.progress = now;
            while (n.answered < n.replies.size()) {
                const int parsed = n.connection.next_reply();
                if (parsed < 0) {
                    mark_failed(n);
                    return;
                }
                if (parsed == 0) break;
                take_reply(b, n, n.replies[n.answered], command);
                ++n.answered;
                expect_next(b, n, command);
            }
            if (n.answered == n.replies.size()) {
                n.failures = 0;  // a whole pipeline answered: the node is healthy
                return;
            }
        }
    }

    // ---- replies ------------------------------------------------------------------------------------------
    void take_reply(redis_batch& b, node& n, const expected& e, redis_command command) {
        if (e.asking || command == redis_command::del) return;  // an ASKING that failed shows in the command after it
        redis_item& it = b.items[e.item];
        const redis_reply_sink& r = n.connection.sink();
        if (r.nested) return;  // no reply to these commands: an error
        if (r.type == REDIS_REPLY_ERROR) return take_error(n, it, e.item, command, r.message());
        switch (command) {
            case redis_command::exists:
                if (r.type == REDIS_REPLY_INTEGER) it.result = r.integer > 0 ? PageResult::hit : PageResult::miss;
                break;
            case redis_command::get:
                if (r.type == REDIS_REPLY_NIL) it.result = PageResult::miss;
                if (r.type == REDIS_REPLY_STRING) check_value(it, r);
                break;
            case redis_command::set_nx:
                if (r.type == REDIS_REPLY_STATUS && r.message() == "OK") {
                    it.result = PageResult::hit;
                    it.written = true;
                } else if (r.type == REDIS_REPLY_NIL) {
                    it.result = PageResult::hit;  // held already (NX): same key, same bytes
                }
                break;
            case redis_command::del: break;
        }
    }
    void take_error(node& n, redis_item& it, std::uint32_t i, redis_command command, std::string_view message) {
        const bool moved = message.starts_with("MOVED ");
        if (moved || message.starts_with("ASK ")) {
            // "MOVED <slot> <host>:<port>" (ASK alike); an empty host is the node that answered.
            const std::size_t space = message.find(' ', moved ? 6 : 4);
            if (space == std::string_view::npos || ++it.redirects > options_.max_redirects) return;
            std::uint32_t slot = 0;
            const std::string_view number = message.substr(moved ? 6 : 4, space - (moved ? 6 : 4));
            const bool number_read = std::from_chars(number.data(), number.data() + number.size(), slot).ec == std::errc{};
            if (!number_read || slot >= redis_slot_count) return;
            std::string_view where = message.substr(space + 1);
            redis_endpoint at;
            const std::string with_host = where.starts_with(':') ? n.at.host + std::string(where) : std::string(where);
            if (!parse_redis_endpoint(with_host, at)) return;
            const std::int32_t target = node_of(at);
            if (moved) {
                owner_[slot] = target;
                map_stale_ = true;
                next_refresh_ = redis_clock::now();  // the map changed: refresh it before the next round
            } else {
                it.ask_node = target;
            }
            retry_.push_back(i);
            return;
        }
        // Full, and the operator's policy evicts nothing: declined, as a store without room declines.
        if (command == redis_command::set_nx && message.starts_with("OOM")) it.result = PageResult::miss;
    }
    // A value found for a get: served only when its header and payload check out for the item's key, kind and
    // size; a value of another size or kind is a plain miss, anything else that fails is corrupt.
    static void check_value(redis_item& it, const redis_reply_sink& r) {
        it.result = PageResult::miss;
        if (r.length < object_header_bytes) {
            it.corrupt = true;
            return;
        }
        const ObjectHeader h = load_header(std::span<const std::byte, object_header_bytes>(it.header));
        const std::size_t stored = r.length - object_header_bytes;
        switch (check_header(h, it.key, it.kind, stored)) {
            case ObjectCheck::good:
                if (!r.fitted) return;  // a good object of another size
                if (check_payload(h, {it.data, it.size}) == ObjectCheck::good)
                    it.result = PageResult::hit;
                else
                    it.corrupt = true;
                return;
            case ObjectCheck::other_key:
                // Our key as another kind is a miss; another key under our name is corrupt.
                it.corrupt = h.key != it.key ||
                             check_header(h, it.key, static_cast<ObjectKind>(h.kind), stored) != ObjectCheck::good;
                return;
            default: it.corrupt = true; return;
        }
    }

    redis_client_options options_;
    std::vector<std::unique_ptr<node>> nodes_;  // the seeds first; held by pointer: a reader's sink never moves
    std::vector<std::int32_t> owner_;           // the node serving each slot; -1 unknown
    std::vector<std::int32_t> fresh_;           // the map being read
    bool map_known_ = false;
    bool map_stale_ = true;                     // a redirect or a failure since the map was read
    redis_clock::time_point next_refresh_{};    // a stale map is read again no sooner (a MOVED: at once)
    std::vector<std::uint32_t> todo_, retry_, active_, order_, polled_;
    std::vector<pollfd> fds_;
    std::vector<char> inbox_;  // what one recv brings, before the reader takes it (64 KiB: the leftover a reply
                               // leaves in the reader is moved to its front, so smaller chunks move less)
};

}  // namespace unikv::detail::storage
