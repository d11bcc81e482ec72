#pragma once
// Worker threads for a storage backend's blocking calls: each `io_lane` runs its own FIFO of jobs on one thread
// and hands each finished job to one `completions` list the driving thread polls. A backend keeps reads and
// writes on separate lanes, so a long backup never queues ahead of a prefetch.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace unikv::detail::storage {

// Finished jobs, in finishing order, from every lane.
template <class Job>
class completions {
public:
    void push(Job* job) {
        {
            std::lock_guard lock(mutex_);
            done_.push_back(job);
        }
        ready_.notify_one();
    }
    // Moves the finished jobs into `out` (cleared first), waiting up to `wait` for one when there is none.
    void take(std::vector<Job*>& out, std::chrono::nanoseconds wait) {
        out.clear();
        std::unique_lock lock(mutex_);
        if (done_.empty() && wait > std::chrono::nanoseconds::zero())
            ready_.wait_for(lock, wait, [&] { return !done_.empty(); });
        out.swap(done_);
    }

private:
    std::mutex mutex_;
    std::condition_variable ready_;
    std::vector<Job*> done_;
};

// One worker thread running `run(Job&)` over a FIFO; each finished job goes to `done`. The destructor runs the
// jobs still queued, then joins.
template <class Job, class Run>
class io_lane {
public:
    io_lane(completions<Job>& done, Run run) : done_(done), run_(std::move(run)), thread_([this] { serve(); }) {}
    io_lane(const io_lane&) = delete;
    io_lane& operator=(const io_lane&) = delete;
    ~io_lane() {
        {
            std::lock_guard lock(mutex_);
            stop_ = true;
        }
        wake_.notify_one();
        thread_.join();
    }

    void submit(Job* job) {
        {
            std::lock_guard lock(mutex_);
            queue_.push_back(job);
        }
        wake_.notify_one();
    }

private:
    void serve() {
        for (;;) {
            Job* job = nullptr;
            {
                std::unique_lock lock(mutex_);
                wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
                if (queue_.empty()) return;
                job = queue_.front();
                queue_.pop_front();
            }
            run_(*job);
            done_.push(job);
        }
    }

    completions<Job>& done_;
    Run run_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<Job*> queue_;
    bool stop_ = false;
    std::thread thread_;  // last: starts after every member above exists
};

}  // namespace unikv::detail::storage
