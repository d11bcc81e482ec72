#pragma once
// Helpers of the tests that talk to the Redis test cluster (scripts/redis-cluster.sh; UNIKV_REDIS_CLUSTER names
// one of its nodes): the seed, fresh key prefixes, short-timeout configurations, an administrative connection,
// the cluster's masters and slots, and a node a test kills and restarts by its PID. Every wait is bounded.

#include <doctest/doctest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include <unikv/storage/redis_cluster_storage.hpp>

extern char** environ;

namespace unikv::test {

using redis_clock = std::chrono::steady_clock;
inline constexpr std::string_view redis_script_marker = "# unikv test cluster node (scripts/redis-cluster.sh)";

// The cluster named by UNIKV_REDIS_CLUSTER ("host:port" of one node); fails the test case, saying how to start
// one, when the variable is not set.
inline std::string redis_seed() {
    const char* seed = std::getenv("UNIKV_REDIS_CLUSTER");
    REQUIRE_MESSAGE((seed != nullptr && *seed != '\0'),
                    "UNIKV_REDIS_CLUSTER is not set: start the test cluster with `scripts/redis-cluster.sh start` and run "
                    "with UNIKV_REDIS_CLUSTER=127.0.0.1:7301 (ctest sets it; scripts/test.sh starts the cluster)");
    const std::string_view text(seed);
    const std::size_t colon = text.rfind(':');
    const std::string host(text.substr(0, colon == std::string_view::npos ? text.size() : colon));
    const int port = colon == std::string_view::npos ? 0 : std::atoi(seed + colon + 1);
    redisContext* c = redisConnectWithTimeout(host.c_str(), port, timeval{1, 0});
    const bool reached = c != nullptr && c->err == 0;
    redisFree(c);
    REQUIRE_MESSAGE(reached, "nothing answers at UNIKV_REDIS_CLUSTER=", std::string(seed),
                    ": start the test cluster with `scripts/redis-cluster.sh start`");
    return seed;
}

// A key prefix no earlier run used (a put of a key held already is a hit, which would hide a broken put).
inline std::string redis_prefix(std::string_view test) {
    const auto now = std::chrono::system_clock::now().time_since_epoch().count();
    return "unikv-test:" + std::to_string(::getpid()) + "-" + std::to_string(now) + ":" + std::string(test) + ":";
}

// Short timeouts, so that the fault tests stay quick.
inline RedisClusterStorageConfig redis_config(std::string prefix) {
    return {.seeds = {redis_seed()},
            .key_prefix = std::move(prefix),
            .connect_timeout = std::chrono::milliseconds(300),
            .command_timeout = std::chrono::milliseconds(300),
            .round_timeout = std::chrono::milliseconds(5000),
            .max_redirects = 5,
            .backoff_initial = std::chrono::milliseconds(20),
            .backoff_max = std::chrono::milliseconds(200),
            .max_batch = 512};
}

struct redis_reply_free {
    void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using redis_reply = std::unique_ptr<redisReply, redis_reply_free>;

// A blocking administrative connection to one node.
class redis_admin {
public:
    redis_admin(const std::string& host, int port) {
        context_.reset(redisConnectWithTimeout(host.c_str(), port, timeval{2, 0}));
        REQUIRE_MESSAGE((context_ != nullptr && context_->err == 0), "cannot reach the Redis node ", host, ":", port,
                        ": start the test cluster with `scripts/redis-cluster.sh start`");
        redisSetTimeout(context_.get(), timeval{5, 0});
    }
    // Runs one command; `words` may hold binary values. Null when the connection failed.
    redis_reply try_run(std::initializer_list<std::string_view> words) noexcept {
        const char* argv[16];
        std::size_t lengths[16];
        int n = 0;
        for (const std::string_view w : words) {
            if (n == 16) return nullptr;
            argv[n] = w.data();
            lengths[n++] = w.size();
        }
        return redis_reply(static_cast<redisReply*>(redisCommandArgv(context_.get(), n, argv, lengths)));
    }
    redis_reply run(std::initializer_list<std::string_view> words) {
        redis_reply reply = try_run(words);
        REQUIRE_MESSAGE(reply != nullptr, "a Redis command failed: ", std::string(context_->errstr));
        return reply;
    }
    // Runs one command and checks that it answered +OK.
    void ok(std::initializer_list<std::string_view> words) {
        const redis_reply r = run(words);
        REQUIRE_MESSAGE((r->type == REDIS_REPLY_STATUS && std::string_view(r->str, r->len) == "OK"), "Redis answered ",
                        std::string(r->str != nullptr ? r->str : "?", r->str != nullptr ? r->len : 1), " to ", *words.begin());
    }
    // The field `name` of INFO's text (empty when absent).
    std::string info(std::string_view name) {
        const redis_reply r = run({"INFO", "server"});
        const std::string text(r->str, r->len);
        const std::string field = std::string(name) + ":";
        const std::size_t at = text.find(field);
        if (at == std::string::npos) return {};
        const std::size_t end = text.find("\r\n", at);
        return text.substr(at + field.size(), end - at - field.size());
    }

private:
    struct context_free {
        void operator()(redisContext* c) const noexcept { redisFree(c); }
    };
    std::unique_ptr<redisContext, context_free> context_;
};

// The cluster's masters as CLUSTER SLOTS tells them.
struct redis_master {
    std::string host;
    int port = 0;
    std::string id;
    std::vector<std::pair<long long, long long>> ranges;
};
struct redis_view {
    std::vector<redis_master> masters;

    static redis_view load() {
        const std::string seed = redis_seed();
        const std::size_t colon = seed.rfind(':');
        redis_admin admin(seed.substr(0, colon), std::atoi(seed.c_str() + colon + 1));
        const redis_reply r = admin.run({"CLUSTER", "SLOTS"});
        REQUIRE(r->type == REDIS_REPLY_ARRAY);
        redis_view view;
        for (std::size_t i = 0; i < r->elements; ++i) {
            const redisReply* range = r->element[i];
            const redisReply* node = range->element[2];
            const std::string host(node->element[0]->str, node->element[0]->len);
            const int port = static_cast<int>(node->element[1]->integer);
            const std::string id(node->element[2]->str, node->element[2]->len);
            auto m = std::find_if(view.masters.begin(), view.masters.end(), [&](const redis_master& x) { return x.id == id; });
            if (m == view.masters.end()) {
                view.masters.push_back({host, port, id, {}});
                m = view.masters.end() - 1;
            }
            m->ranges.emplace_back(range->element[0]->integer, range->element[1]->integer);
        }
        std::sort(view.masters.begin(), view.masters.end(), [](const auto& a, const auto& b) { return a.port < b.port; });
        REQUIRE_MESSAGE(view.masters.size() >= 3, "the test cluster has 3 masters; run `scripts/redis-cluster.sh start`");
        return view;
    }
    [[nodiscard]] std::size_t owner(std::uint16_t slot) const {
        for (std::size_t m = 0; m < masters.size(); ++m)
            for (const auto& [first, last] : masters[m].ranges)
                if (slot >= first && slot <= last) return m;
        FAIL("slot ", slot, " has no owner");
        return 0;
    }
    redis_admin admin(std::size_t m) const { return redis_admin(masters[m].host, masters[m].port); }
};

// True when process `pid` has exited (a zombie counts: nothing may reap a daemon's parentless process).
inline bool redis_process_gone(pid_t pid) {
    if (::kill(pid, 0) != 0) return errno == ESRCH;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const std::size_t paren = text.rfind(')');
    return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'Z';
}

// Waits up to `limit` for `done()`, checking every 50 ms; returns its last answer.
template <class F>
bool redis_eventually(std::chrono::milliseconds limit, F done) {
    const auto deadline = redis_clock::now() + limit;
    for (;;) {
        if (done()) return true;
        if (redis_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
}

inline bool redis_cluster_ok(const redis_view& view) {
    for (std::size_t m = 0; m < view.masters.size(); ++m) {
        redisContext* c = redisConnectWithTimeout(view.masters[m].host.c_str(), view.masters[m].port, timeval{1, 0});
        bool ok = c != nullptr && c->err == 0;
        if (ok) {
            redis_reply r(static_cast<redisReply*>(redisCommand(c, "CLUSTER INFO")));
            ok = r != nullptr && r->type == REDIS_REPLY_STRING &&
                 std::string_view(r->str, r->len).find("cluster_state:ok") != std::string_view::npos;
        }
        redisFree(c);
        if (!ok) return false;
    }
    return true;
}

// One node of the script's cluster that a test kills and restarts by its PID (from INFO); restarted, if still down,
// when the test ends, so later tests find a whole cluster.
class redis_node_process {
public:
    redis_node_process(const redis_view& view, std::size_t m) : view_(view), m_(m) {
        redis_admin admin = view.admin(m);
        pid_ = static_cast<pid_t>(std::atol(admin.info("process_id").c_str()));
        config_ = admin.info("config_file");
        executable_ = admin.info("executable");
        std::ifstream file(config_);
        std::string first;
        std::getline(file, first);
        REQUIRE_MESSAGE(first == redis_script_marker, "node ", view.masters[m].port, "'s configuration (", config_,
                        ") is not scripts/redis-cluster.sh's: the fault tests kill and restart only that cluster's nodes");
        REQUIRE(pid_ > 0);
    }
    redis_node_process(const redis_node_process&) = delete;
    redis_node_process& operator=(const redis_node_process&) = delete;
    ~redis_node_process() {
        if (killed_) restart();
    }

    void kill() {
        REQUIRE(::kill(pid_, SIGKILL) == 0);
        killed_ = true;
        REQUIRE_MESSAGE(redis_eventually(std::chrono::seconds(5), [&] { return redis_process_gone(pid_); }), "node ", pid_,
                        " did not exit");
    }
    // Starts the node again from its configuration (it daemonizes and rejoins the cluster with its nodes.conf) and
    // waits until the whole cluster is ok.
    void restart() {
        killed_ = false;
        // INFO's executable is argv[0] made absolute against the working directory: a real path only when the
        // node was started by one (as scripts/redis-cluster.sh does); else the one on the PATH.
        const bool runnable = !executable_.empty() && ::access(executable_.c_str(), X_OK) == 0;
        std::string exe = runnable ? executable_ : std::string("redis-server");
        std::string conf = config_;
        char* argv[] = {exe.data(), conf.data(), nullptr};
        pid_t child = 0;
        const int spawned = ::posix_spawnp(&child, exe.c_str(), nullptr, nullptr, argv, environ);
        // No REQUIRE: the destructor calls this.
        CHECK_MESSAGE(spawned == 0, "cannot start ", exe, " ", conf, ": ", std::string(std::strerror(spawned)));
        if (spawned != 0) return;
        int status = 0;
        ::waitpid(child, &status, 0);  // the daemon's parent exits at once
        CHECK_MESSAGE(redis_eventually(std::chrono::seconds(15), [&] { return redis_cluster_ok(view_); }),
                      "the cluster is not ok 15 s after node ", view_.masters[m_].port, " restarted");
    }

private:
    const redis_view& view_;
    std::size_t m_;
    pid_t pid_ = 0;
    std::string config_;
    std::string executable_;
    bool killed_ = false;
};


}  // namespace unikv::test
