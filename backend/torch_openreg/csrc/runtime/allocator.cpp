// allocator.cpp - the caching device allocator on orMalloc (PyTorch's
// c10::DeviceAllocator: statistics, empty_cache, record_stream), and pinned
// host memory on orMallocHost (Tensor.pin_memory()).
//
// As CUDA's caching allocator: a freed block goes back to a pool of the
// stream it was allocated on, and only an allocation on that same stream
// reuses it, so reuse is ordered after every use queued on the stream and no
// one waits. A block also used on other streams (record_stream) is reusable
// once events recorded on those streams at free time have completed.
// Blocks go back to the arena (orFree) on empty_cache, or when an allocation
// finds the arena full: then the device's streams are synchronized first,
// since orFree is immediate.
//
// A block shared with another process (ipc_export: an IPC handle of it was
// made) is never cached: when its tensor dies it goes back to the arena once
// its streams' work has run, so that the handle becomes stale (opening it is
// refused) instead of naming memory that another tensor reuses.
#include <algorithm>
#include <deque>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <torch/library.h>

#include "bindings.h"
#include "runtime/openreg_torch.h"

namespace torch_openreg {
namespace {

using c10::CachingDeviceAllocator::DeviceStats;
using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;

// CUDA's granularity: blocks are multiples of 512 bytes, and a request up to
// 1 MiB counts in the "small pool" statistics, beyond in the "large" one.
constexpr size_t kMinBlockSize = 512;
constexpr size_t kSmallSize = 1 << 20;

struct Block {
    void *ptr;
    size_t size;      // bytes held (rounded)
    size_t requested; // bytes asked for by the current allocation
    c10::Stream stream;
    std::vector<c10::Stream> used_on; // from record_stream, cleared on free
    int pending_events = 0;
    bool exported = false; // an IPC handle of it was made: freed, not cached
    Block(void *p, size_t n, c10::Stream s) : ptr(p), size(n), requested(0), stream(s) {}
};

// Free blocks ordered by (stream, size, address): a lower_bound finds the
// best fit of one stream.
struct BlockOrder {
    bool operator()(const Block *a, const Block *b) const {
        if (a->stream.id() != b->stream.id())
            return a->stream.id() < b->stream.id();
        if (a->size != b->size)
            return a->size < b->size;
        return a->ptr < b->ptr;
    }
};

size_t round_size(size_t n) { return (n + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize; }

void update(StatArray &stat, size_t size, int64_t amount) {
    StatType pool = size <= kSmallSize ? StatType::SMALL_POOL : StatType::LARGE_POOL;
    for (StatType t : {StatType::AGGREGATE, pool}) {
        Stat &s = stat[static_cast<size_t>(t)];
        if (amount >= 0)
            s.increase(static_cast<size_t>(amount));
        else
            s.decrease(static_cast<size_t>(-amount));
    }
}

class DevicePool {
  public:
    explicit DevicePool(c10::DeviceIndex index) : index_(index) {}

    Block *allocate(size_t nbytes, c10::Stream stream) {
        size_t size = round_size(nbytes);
        std::lock_guard<std::mutex> lock(mutex_);
        process_events();
        Block *block = reuse(size, stream);
        if (block == nullptr)
            block = fresh(size, stream, nbytes);
        block->requested = nbytes;
        active_[block->ptr] = block;
        update(stats_.allocation, block->size, 1);
        update(stats_.allocated_bytes, block->size, static_cast<int64_t>(block->size));
        update(stats_.active, block->size, 1);
        update(stats_.active_bytes, block->size, static_cast<int64_t>(block->size));
        update(stats_.requested_bytes, block->size, static_cast<int64_t>(nbytes));
        return block;
    }

    // From the tensor's deleter: any thread, any current device, no throw.
    void free(Block *block) {
        std::lock_guard<std::mutex> lock(mutex_);
        active_.erase(block->ptr);
        update(stats_.allocation, block->size, -1);
        update(stats_.allocated_bytes, block->size, -static_cast<int64_t>(block->size));
        update(stats_.requested_bytes, block->size, -static_cast<int64_t>(block->requested));
        if (!block->used_on.empty() && record_events(block))
            return; // still active until its events complete
        release_to_pool(block);
    }

    void record_stream(Block *block, const c10::Stream &stream) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stream == block->stream)
            return;
        for (const c10::Stream &s : block->used_on)
            if (s == stream)
                return;
        block->used_on.push_back(stream);
    }

    void empty_cache() {
        std::lock_guard<std::mutex> lock(mutex_);
        release_cached();
    }

    // Marks an active block as shared with other processes.
    void mark_exported(Block *block) {
        std::lock_guard<std::mutex> lock(mutex_);
        block->exported = true;
    }

    DeviceStats stats() {
        std::lock_guard<std::mutex> lock(mutex_);
        return stats_;
    }
    void reset_accumulated() {
        std::lock_guard<std::mutex> lock(mutex_);
        for (StatArray *a : stat_arrays())
            for (Stat &s : *a)
                s.reset_accumulated();
        stats_.num_alloc_retries = stats_.num_ooms = 0;
        stats_.num_device_alloc = stats_.num_device_free = 0;
        stats_.num_sync_all_streams = 0;
    }
    void reset_peak() {
        std::lock_guard<std::mutex> lock(mutex_);
        for (StatArray *a : stat_arrays())
            for (Stat &s : *a)
                s.reset_peak();
    }

  private:
    std::vector<StatArray *> stat_arrays() {
        return {&stats_.allocation,   &stats_.segment,         &stats_.active,
                &stats_.inactive_split, &stats_.allocated_bytes, &stats_.reserved_bytes,
                &stats_.active_bytes, &stats_.inactive_split_bytes, &stats_.requested_bytes};
    }

    // The best-fitting cached block of `stream`, no more than twice the size
    // (a bigger one would be held for little use).
    Block *reuse(size_t size, const c10::Stream &stream) {
        Block key(nullptr, size, stream);
        auto it = free_.lower_bound(&key);
        if (it == free_.end() || (*it)->stream != stream || (*it)->size > 2 * size)
            return nullptr;
        Block *block = *it;
        free_.erase(it);
        return block;
    }

    Block *fresh(size_t size, const c10::Stream &stream, size_t nbytes) {
        DeviceScope scope(index_);
        void *ptr = nullptr;
        orError_t err = orMalloc(&ptr, size);
        if (err == orErrorMemoryAllocation && !free_.empty()) {
            // The cache holds memory: give it back and try once more.
            stats_.num_alloc_retries++;
            release_cached();
            err = orMalloc(&ptr, size);
        }
        if (err == orErrorMemoryAllocation) {
            stats_.num_ooms++;
            size_t free_bytes = 0, total = 0;
            orMemGetInfo(&free_bytes, &total);
            const Stat &allocated =
                stats_.allocated_bytes[static_cast<size_t>(StatType::AGGREGATE)];
            const Stat &reserved = stats_.reserved_bytes[static_cast<size_t>(StatType::AGGREGATE)];
            TORCH_CHECK_WITH(OutOfMemoryError, false, "openreg: out of memory on device ",
                             static_cast<int>(index_), ": tried to allocate ", nbytes,
                             " bytes; the device has ", total, " bytes, of which ", free_bytes,
                             " are free, ", allocated.current, " allocated by tensors and ",
                             reserved.current,
                             " reserved by the caching allocator (OPENREG_DEVICE_MEM sets the "
                             "capacity)");
        }
        OR_TORCH_CHECK(err);
        stats_.num_device_alloc++;
        update(stats_.segment, size, 1);
        update(stats_.reserved_bytes, size, static_cast<int64_t>(size));
        return new Block(ptr, size, stream);
    }

    // Records an event on every other stream the block was used on; returns
    // false if none could be recorded (then the block is ready now).
    bool record_events(Block *block) {
        for (const c10::Stream &s : block->used_on) {
            try {
                DeviceScope scope(s.device_index());
                orEvent_t event = nullptr;
                if (orEventCreateWithFlags(&event, orEventDisableTiming) != orSuccess)
                    continue;
                if (orEventRecord(event, stream_handle(s)) != orSuccess) {
                    orEventDestroy(event);
                    continue;
                }
                events_.emplace_back(event, block);
                block->pending_events++;
            } catch (...) {
            }
        }
        block->used_on.clear();
        return block->pending_events > 0;
    }

    void process_events() {
        while (!events_.empty()) {
            auto [event, block] = events_.front();
            if (orEventQuery(event) == orErrorNotReady)
                break; // in order: later ones are rarely done before
            orEventDestroy(event);
            events_.pop_front();
            if (--block->pending_events == 0)
                release_to_pool(block);
        }
    }

    void release_to_pool(Block *block) {
        update(stats_.active, block->size, -1);
        update(stats_.active_bytes, block->size, -static_cast<int64_t>(block->size));
        if (block->exported) {
            release_exported(block);
            return;
        }
        free_.insert(block);
    }

    // An exported block goes back to the arena, after the work queued on its
    // stream (other streams' work is done: release_to_pool follows their
    // events). Called from deleters: never throws.
    void release_exported(Block *block) {
        try {
            DeviceScope scope(index_);
            {
                WithoutGil no_gil;
                OR_TORCH_WARN(orStreamSynchronize(stream_handle(block->stream)));
            }
            OR_TORCH_WARN(orFree(block->ptr));
        } catch (...) {
        }
        stats_.num_device_free++;
        update(stats_.segment, block->size, -1);
        update(stats_.reserved_bytes, block->size, -static_cast<int64_t>(block->size));
        delete block;
    }

    // Back to the arena: every cached block, once the work queued on the
    // device (which may still use them) has run.
    void release_cached() {
        DeviceScope scope(index_);
        {
            WithoutGil no_gil;
            orDeviceSynchronize();
        }
        stats_.num_sync_all_streams++;
        for (auto &[event, block] : events_) {
            orEventSynchronize(event);
            orEventDestroy(event);
            if (--block->pending_events == 0)
                release_to_pool(block);
        }
        events_.clear();
        for (Block *block : free_) {
            OR_TORCH_WARN(orFree(block->ptr));
            stats_.num_device_free++;
            update(stats_.segment, block->size, -1);
            update(stats_.reserved_bytes, block->size, -static_cast<int64_t>(block->size));
            delete block;
        }
        free_.clear();
    }

    c10::DeviceIndex index_;
    std::mutex mutex_;
    std::set<Block *, BlockOrder> free_;
    std::unordered_map<void *, Block *> active_;
    std::deque<std::pair<orEvent_t, Block *>> events_;
    DeviceStats stats_;
};

// Never destroyed: tensors of Python objects may die after static
// destructors have run at exit.
std::vector<DevicePool *> &pools() {
    static auto *all = [] {
        auto *v = new std::vector<DevicePool *>();
        for (c10::DeviceIndex i = 0; i < device_count(); i++)
            v->push_back(new DevicePool(i));
        return v;
    }();
    return *all;
}

DevicePool &pool(c10::DeviceIndex index) {
    check_device_index(index);
    return *pools().at(index);
}

void free_block(void *ctx) {
    Block *block = static_cast<Block *>(ctx);
    pools().at(block->stream.device_index())->free(block);
}

class CachingAllocator final : public c10::DeviceAllocator {
  public:
    c10::DataPtr allocate(size_t nbytes) override {
        c10::DeviceIndex index = current_device();
        c10::Device device(kDeviceType, index);
        if (nbytes == 0)
            return c10::DataPtr(nullptr, device);
        Block *block = pool(index).allocate(nbytes, current_stream(index));
        return c10::DataPtr(block->ptr, block, &free_block, device);
    }
    c10::DeleterFnPtr raw_deleter() const override { return nullptr; }
    void copy_data(void *dest, const void *src, size_t count) const override {
        OR_TORCH_CHECK(orMemcpy(dest, src, count, orMemcpyDeviceToDevice));
    }

    bool initialized() override { return device_count() > 0; }
    void emptyCache(c10::MempoolId_t) override {
        for (DevicePool *p : pools())
            p->empty_cache();
    }
    void recordStream(const c10::DataPtr &ptr, c10::Stream stream) override {
        if (ptr.get_deleter() != &free_block)
            return; // not ours (or empty): nothing to order
        Block *block = static_cast<Block *>(ptr.get_context());
        pool(block->stream.device_index()).record_stream(block, stream);
    }
    DeviceStats getDeviceStats(c10::DeviceIndex index) override { return pool(index).stats(); }
    void resetAccumulatedStats(c10::DeviceIndex index) override { pool(index).reset_accumulated(); }
    void resetPeakStats(c10::DeviceIndex index) override { pool(index).reset_peak(); }
    std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex index) override {
        check_device_index(index);
        DeviceScope scope(index);
        size_t free_bytes = 0, total = 0;
        OR_TORCH_CHECK(orMemGetInfo(&free_bytes, &total));
        return {free_bytes, total};
    }
};

// Pinned host memory. An asynchronous copy may still read or write a block
// when its tensor dies (PyTorch's DDP frees the pinned source of a
// non-blocking copy right after issuing it): as CUDA's host allocator does,
// the copy records an event on its stream (record_host_use), and a freed
// block whose events have not all completed is released only once they have
// (checked at each allocation and free).
struct HostBlock {
    void *ptr;
    std::vector<orEvent_t> uses; // recorded after copies that use the block
};

std::mutex host_mutex;
std::vector<HostBlock *> host_deferred; // freed, uses pending

// Forgets the block's uses that have completed; true if none is left.
// (host_mutex held.)
bool uses_done(HostBlock *block) {
    auto pending = std::remove_if(block->uses.begin(), block->uses.end(), [](orEvent_t used) {
        if (orEventQuery(used) == orErrorNotReady) // still running (not recorded as an error)
            return false;
        orEventDestroy(used);
        return true;
    });
    block->uses.erase(pending, block->uses.end());
    return block->uses.empty();
}

void release_host_block(HostBlock *block) {
    OR_TORCH_WARN(orFreeHost(block->ptr));
    delete block;
}

// Host blocks whose pending uses have completed since: released (host_mutex held).
void release_deferred_locked() {
    auto done = std::partition(host_deferred.begin(), host_deferred.end(),
                               [](HostBlock *b) { return !uses_done(b); });
    for (auto it = done; it != host_deferred.end(); ++it)
        release_host_block(*it);
    host_deferred.erase(done, host_deferred.end());
}

void free_host_memory(void *ctx) {
    auto *block = static_cast<HostBlock *>(ctx);
    std::lock_guard<std::mutex> lock(host_mutex);
    if (uses_done(block))
        release_host_block(block);
    else
        host_deferred.push_back(block);
    release_deferred_locked();
}

class HostAllocator final : public c10::Allocator {
  public:
    c10::DataPtr allocate(size_t nbytes) override {
        {
            std::lock_guard<std::mutex> lock(host_mutex);
            release_deferred_locked();
        }
        void *ptr = nullptr;
        if (nbytes > 0)
            OR_TORCH_CHECK(orMallocHost(&ptr, nbytes));
        return c10::DataPtr(ptr, new HostBlock{ptr, {}}, &free_host_memory,
                            c10::Device(c10::DeviceType::CPU));
    }
    c10::DeleterFnPtr raw_deleter() const override { return nullptr; } // ctx != data
    void copy_data(void *dest, const void *src, size_t count) const override {
        default_copy_data(dest, src, count);
    }
};

CachingAllocator g_device_allocator;
HostAllocator g_host_allocator;

} // namespace

// c10::GetAllocator(PrivateUse1) and at::getDeviceAllocator, for PyTorch's
// generic code (torch.accelerator.memory_*).
REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_device_allocator);

c10::Allocator *device_allocator() { return &g_device_allocator; }
c10::Allocator *host_allocator() { return &g_host_allocator; }

void record_host_use(const at::Tensor &pinned, c10::DeviceIndex device) {
    const c10::DataPtr &data = pinned.storage().data_ptr();
    if (data.get_deleter() != &free_host_memory)
        return; // not this allocator's block (pinned by other means)
    auto *block = static_cast<HostBlock *>(data.get_context());
    DeviceScope scope(device);
    orEvent_t used = nullptr;
    OR_TORCH_CHECK(orEventCreateWithFlags(&used, orEventDisableTiming));
    orError_t err = orEventRecord(used, current_stream_handle(device));
    if (err != orSuccess) {
        orEventDestroy(used);
        OR_TORCH_CHECK(err);
    }
    std::lock_guard<std::mutex> lock(host_mutex);
    uses_done(block); // a long-lived buffer keeps only the uses still running
    block->uses.push_back(used);
}

void *ipc_export(const c10::DataPtr &data_ptr) {
    if (data_ptr.get_deleter() != &free_block)
        return nullptr;
    Block *block = static_cast<Block *>(data_ptr.get_context());
    pool(block->stream.device_index()).mark_exported(block);
    return block->ptr;
}

void resize_storage_bytes(const c10::Storage &storage, size_t newsize) {
    TORCH_CHECK(storage.resizable(), "openreg: trying to resize a storage that is not resizable");
    c10::Device device = storage.device();
    c10::DeviceGuard guard(device);
    c10::DataPtr fresh = newsize == 0 ? c10::DataPtr(nullptr, device)
                                      : device_allocator()->allocate(newsize);
    size_t keep = std::min(storage.nbytes(), newsize);
    c10::StorageImpl *impl = storage.unsafeGetStorageImpl();
    if (keep > 0 && storage.data() != nullptr) {
        OR_TORCH_CHECK(orMemcpyAsync(fresh.get(), storage.data(), keep, orMemcpyDeviceToDevice,
                                     current_stream_handle(device.index())));
        // The old block is not reused before the copy out of it has run.
        record_data_ptr_on_stream(impl->data_ptr(), current_stream(device.index()));
    }
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
}

void record_data_ptr_on_stream(const c10::DataPtr &data_ptr, const c10::Stream &stream) {
    g_device_allocator.recordStream(data_ptr, stream);
}

namespace {

// Tensor.record_stream(s): the tensor's memory is not reused before the work
// queued on s by the time it is freed has run.
void record_stream(at::Tensor &self, c10::Stream stream) {
    TORCH_CHECK(stream.device_type() == kDeviceType, "openreg: record_stream takes a stream of "
                "an openreg device, got one of ", stream.device());
    record_data_ptr_on_stream(self.storage().data_ptr(), stream);
}

// torch.cuda.memory_stats' keys: "<stat>.<pool>.<current|peak|allocated|freed>".
void put(pybind11::dict &d, const char *name, const StatArray &stat) {
    static const char *pools[] = {"all", "small_pool", "large_pool"};
    for (size_t p = 0; p < stat.size(); p++) {
        std::string key = std::string(name) + "." + pools[p] + ".";
        d[(key + "current").c_str()] = stat[p].current;
        d[(key + "peak").c_str()] = stat[p].peak;
        d[(key + "allocated").c_str()] = stat[p].allocated;
        d[(key + "freed").c_str()] = stat[p].freed;
    }
}

} // namespace
} // namespace torch_openreg

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
    m.impl("record_stream", &torch_openreg::record_stream);
}

TORCH_OPENREG_BINDINGS(allocator) {
    using namespace torch_openreg;
    m.def("memory_stats", [](int64_t index) {
        DeviceStats s = pool(static_cast<c10::DeviceIndex>(index)).stats();
        pybind11::dict d;
        put(d, "allocation", s.allocation);
        put(d, "segment", s.segment);
        put(d, "active", s.active);
        put(d, "allocated_bytes", s.allocated_bytes);
        put(d, "reserved_bytes", s.reserved_bytes);
        put(d, "active_bytes", s.active_bytes);
        put(d, "requested_bytes", s.requested_bytes);
        d["num_alloc_retries"] = s.num_alloc_retries;
        d["num_ooms"] = s.num_ooms;
        d["num_sync_all_streams"] = s.num_sync_all_streams;
        d["num_device_alloc"] = s.num_device_alloc;
        d["num_device_free"] = s.num_device_free;
        return d;
    });
    m.def("reset_peak_memory_stats", [](int64_t index) {
        pool(static_cast<c10::DeviceIndex>(index)).reset_peak();
    });
    m.def("reset_accumulated_memory_stats", [](int64_t index) {
        pool(static_cast<c10::DeviceIndex>(index)).reset_accumulated();
    });
    m.def("empty_cache", [](int64_t index) { pool(static_cast<c10::DeviceIndex>(index)).empty_cache(); });
    m.def("mem_get_info", [](int64_t index) {
        return g_device_allocator.getMemoryInfo(static_cast<c10::DeviceIndex>(index));
    });
}
