#pragma once
// One connection of a RedisClusterStorage lane to one Redis node, over hiredis: hiredis connects (with a timeout)
// and runs the blocking administrative commands (CLUSTER SLOTS); the lane's pipelined data commands go through the
// same socket without blocking (`send_some` / `receive_some`, driven by the lane's poll loop), their replies
// parsed by a hiredis reader of our own whose string callback copies a GET's value straight into the caller's
// buffer, so a value is copied once out of the parser instead of into a reply object first.

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>

#include <hiredis/hiredis.h>

#include <unikv/storage/page_object.hpp>

namespace unikv::detail::storage {

using redis_clock = std::chrono::steady_clock;

// A node's address.
struct redis_endpoint {
    std::string host{};
    int port = 0;
    friend bool operator==(const redis_endpoint&, const redis_endpoint&) = default;
};

// "host:port" (or "[v6 address]:port") into `out`; false when it is not that form or the port is not 1..65535.
inline bool parse_redis_endpoint(std::string_view text, redis_endpoint& out) {
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) return false;
    std::string_view host = text.substr(0, colon);
    const std::string_view port = text.substr(colon + 1);
    if (host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    if (host.empty() || port.size() > 5) return false;
    int value = 0;
    for (const char c : port) {
        if (c < '0' || c > '9') return false;
        value = value * 10 + (c - '0');
    }
    if (value < 1 || value > 65535) return false;
    out.host.assign(host);
    out.port = value;
    return true;
}

// Where the reply being parsed goes, and what it was. A GET's value is checked against its item's expected size
// as it is parsed: when the lengths agree the payload lands in the caller's buffer, the header beside it.
struct redis_reply_sink {
    std::byte* header = nullptr;   // a GET's: the first `object_header_bytes` of the value go here
    std::byte* payload = nullptr;  // a GET's: the rest goes here when it is exactly `payload_bytes` long
    std::size_t payload_bytes = 0;
    int type = 0;                  // REDIS_REPLY_*, 0 while none was parsed
    long long integer = 0;
    std::size_t length = 0;        // a string's length
    bool fitted = false;           // the value was header + `payload_bytes` and was copied out whole
    bool nested = false;           // an array: no reply the lane's commands produce
    char text[96] = {};            // a status or error text, cut short
    std::size_t text_length = 0;

    void expect(std::byte* to_header, std::byte* to_payload, std::size_t bytes) noexcept {
        *this = redis_reply_sink{};
        header = to_header;
        payload = to_payload;
        payload_bytes = bytes;
    }
    [[nodiscard]] std::string_view message() const noexcept { return {text, text_length}; }
};

// hiredis reader callbacks filling a `redis_reply_sink` (the reader's privdata); none allocates or throws. Every
// "object" they return is the sink itself, which the reader never frees (`free_object` does nothing).
inline void* redis_sink_string(const redisReadTask* task, char* str, std::size_t len) {
    auto* sink = static_cast<redis_reply_sink*>(task->privdata);
    if (task->parent != nullptr) {
        sink->nested = true;
        return sink;
    }
    sink->type = task->type;
    sink->length = len;
    if (task->type == REDIS_REPLY_STRING) {
        if (sink->header != nullptr) std::memcpy(sink->header, str, std::min(len, object_header_bytes));
        if (sink->payload != nullptr && len == object_header_bytes + sink->payload_bytes) {
            std::memcpy(sink->payload, str + object_header_bytes, sink->payload_bytes);
            sink->fitted = true;
        }
    } else {
        sink->text_length = std::min(len, sizeof sink->text);
        std::memcpy(sink->text, str, sink->text_length);
    }
    return sink;
}
inline void* redis_sink_array(const redisReadTask* task, int) {
    auto* sink = static_cast<redis_reply_sink*>(task->privdata);
    sink->nested = true;
    if (task->parent == nullptr) sink->type = REDIS_REPLY_ARRAY;
    return sink;
}
inline void* redis_sink_integer(const redisReadTask* task, long long value) {
    auto* sink = static_cast<redis_reply_sink*>(task->privdata);
    if (task->parent != nullptr) {
        sink->nested = true;
        return sink;
    }
    sink->type = REDIS_REPLY_INTEGER;
    sink->integer = value;
    return sink;
}
inline void* redis_sink_nil(const redisReadTask* task) {
    auto* sink = static_cast<redis_reply_sink*>(task->privdata);
    if (task->parent != nullptr) {
        sink->nested = true;
        return sink;
    }
    sink->type = REDIS_REPLY_NIL;
    return sink;
}
inline void redis_sink_free(void*) {}

inline redisReplyObjectFunctions redis_sink_functions = {redis_sink_string, redis_sink_array, redis_sink_integer,
                                                         redis_sink_nil, redis_sink_free};

struct redis_context_free {
    void operator()(redisContext* c) const noexcept { redisFree(c); }
};
struct redis_reader_free {
    void operator()(redisReader* r) const noexcept { redisReaderFree(r); }
};
struct redis_reply_free {
    void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using redis_reply_ptr = std::unique_ptr<redisReply, redis_reply_free>;

inline timeval redis_timeval(std::chrono::milliseconds t) noexcept {
    return {static_cast<time_t>(t.count() / 1000), static_cast<suseconds_t>((t.count() % 1000) * 1000)};
}

// One connection to one node. Not connected until `open` succeeds; any failure closes it (the stream's position
// among pipelined replies is then unknown, so it is never reused).
class redis_connection {
public:
    redis_connection() = default;
    redis_connection(const redis_connection&) = delete;
    redis_connection& operator=(const redis_connection&) = delete;

    // Connects within `connect_timeout`; blocking administrative commands then wait at most `command_timeout` per
    // socket call. False (and `error()` says why) when the node cannot be reached.
    bool open(const redis_endpoint& at, std::chrono::milliseconds connect_timeout, std::chrono::milliseconds command_timeout) {
        close();
        std::unique_ptr<redisContext, redis_context_free> c(
            redisConnectWithTimeout(at.host.c_str(), at.port, redis_timeval(connect_timeout)));
        if (c == nullptr || c->err != 0) {
            error_ = c == nullptr ? "cannot allocate a hiredis context" : c->errstr;
            return false;
        }
        if (redisSetTimeout(c.get(), redis_timeval(command_timeout)) != REDIS_OK) {
            error_ = c->errstr;
            return false;
        }
        std::unique_ptr<redisReader, redis_reader_free> r(redisReaderCreateWithFunctions(&redis_sink_functions));
        if (r == nullptr) {
            error_ = "cannot allocate a hiredis reader";
            return false;
        }
        r->privdata = &sink_;
        // Keep the parse buffer between replies (hiredis frees one over 16 KiB whenever it empties, and would grow
        // it again for each large value): it holds about the largest value read.
        r->maxbuf = 0;
        context_ = std::move(c);
        reader_ = std::move(r);
        error_.clear();
        return true;
    }
    void close() noexcept {
        context_.reset();
        reader_.reset();
    }
    [[nodiscard]] bool is_open() const noexcept { return context_ != nullptr; }
    [[nodiscard]] int fd() const noexcept { return context_->fd; }
    [[nodiscard]] const std::string& error() const noexcept { return error_; }

    // A blocking command (`argv` its words); null, the connection closed, when it failed or timed out.
    redis_reply_ptr command(std::span<const std::string_view> argv) {
        const char* words[8];
        std::size_t lengths[8];
        const std::size_t n = std::min<std::size_t>(argv.size(), 8);
        for (std::size_t i = 0; i < n; ++i) {
            words[i] = argv[i].data();
            lengths[i] = argv[i].size();
        }
        redis_reply_ptr reply(static_cast<redisReply*>(redisCommandArgv(context_.get(), static_cast<int>(n), words, lengths)));
        if (reply == nullptr) {
            error_ = context_->errstr;
            close();
        }
        return reply;
    }

    // Sends what it can of `iov[0..count)` without blocking, advancing the vector past what was sent. Returns the
    // bytes sent (0: the socket is full), or -1 when the connection failed.
    long send_some(iovec* iov, std::size_t count) {
        msghdr msg{};
        msg.msg_iov = iov;
        msg.msg_iovlen = count;
        ssize_t n;
        do {
            n = ::sendmsg(fd(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
        } while (n < 0 && errno == EINTR);
        if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : fail_io("send");
        return static_cast<long>(n);
    }

    // Receives what has arrived (into `scratch`) without blocking and hands it to the reader. Returns the bytes
    // received (0: nothing yet), or -1 when the connection failed or was closed by the node.
    long receive_some(std::span<char> scratch) {
        ssize_t n;
        do {
            n = ::recv(fd(), scratch.data(), scratch.size(), MSG_DONTWAIT);
        } while (n < 0 && errno == EINTR);
        if (n == 0) {
            error_ = "the node closed the connection";
            return -1;
        }
        if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : fail_io("recv");
        if (redisReaderFeed(reader_.get(), scratch.data(), static_cast<std::size_t>(n)) != REDIS_OK) {
            error_ = "hiredis could not buffer a reply";
            return -1;
        }
        return static_cast<long>(n);
    }

    // The sink of the next reply (set it up with `expect` before that reply's bytes are parsed).
    [[nodiscard]] redis_reply_sink& sink() noexcept { return sink_; }
    // Parses the next reply from what was received: 1 when one is complete (in `sink()`), 0 when more bytes are
    // needed, -1 on a protocol error.
    int next_reply() {
        void* reply = nullptr;
        if (redisReaderGetReply(reader_.get(), &reply) != REDIS_OK) {
            error_ = "protocol error from the node";
            return -1;
        }
        return reply != nullptr ? 1 : 0;
    }

private:
    int fail_io(const char* what) {
        error_ = what;
        error_ += ": ";
        error_ += std::strerror(errno);
        return -1;
    }

    std::unique_ptr<redisContext, redis_context_free> context_;
    std::unique_ptr<redisReader, redis_reader_free> reader_;  // the data commands' replies, into `sink_`
    redis_reply_sink sink_;  // the reader's privdata: a connection is held by pointer and never moves
    std::string error_;
};

}  // namespace unikv::detail::storage
