// An arrow::MemoryPool that allocates from shared tmpfs files (attune.pipelines.shmpool).
//
// Contract: a node process sets this pool as pyarrow's default pool before its function runs;
// every buffer pyarrow allocates for the node then lives in a MAP_SHARED mapping of a file under
// the run's directory, so SIPC writes the node's output as references to those files instead of
// copying it. Memory is handed out by bumping a pointer through segment files (64 MiB by
// default; an allocation larger than half a segment gets a segment of its own). Freed ranges are
// returned to the kernel by punching holes (whole pages only) as long as the pool is not frozen;
// `freeze()` is called before the output is shared, after which nothing is punched, so a shared
// buffer can never lose its pages. A new segment may be a dropped table's file taken from the
// recycle directory, pages and all, once no process maps it (TakeRecycled). All methods are
// thread-safe (one mutex).
//
// Built on first use by python/attune/pipelines/shmpool.py against pyarrow's headers; the
// Python side gets the pool as a pyarrow.MemoryPool through pyarrow's C API (box_memory_pool).

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>  // renameat2, RENAME_NOREPLACE
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <utility>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <deque>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <arrow/memory_pool.h>
#include <arrow/api.h>
#include <arrow/sparse_tensor.h>
#include <arrow/python/pyarrow.h>
#include <arrow/python/lib_api.h>
#include <arrow/status.h>

namespace {

constexpr int64_t kPageBytes = 4096;
// Allocations at least this large are populated up front (see Allocate).
constexpr int64_t kPopulateBytesMin = 256 << 10;
// Freed blocks kept for reuse at most (beyond it a freed block's pages are punched at once).
constexpr int64_t kFreeCacheMax = 256 << 20;
// Whole segments a reused node process keeps from one node for the next (see Restart), at most
// this many and at most two standard segments' bytes together.
constexpr size_t kSpareSegmentsMax = 8;
// By default an allocation at least this large (and at most half a segment) gets a segment of
// its own (create(..., own_segment_bytes_min); 0 switches it off),
// twice its size so that a builder can still grow it in place: a large temporary then fills a
// segment that no output refers to, which a reused process keeps as a spare, and the next
// node's large buffers reuse its pages warm instead of faulting in, allocating and zeroing
// fresh tmpfs pages (3-5x the cost of a kernel such as a filter on this project's machines;
// docs/kelvin.md). Below it, blocks share the bump segment.
constexpr int64_t kOwnSegmentBytesMinDefault = 4 << 20;

// Every block is a whole size class: 64-byte multiples below a page, page multiples above, so
// a freed block serves any later request of the same class.
inline int64_t SizeClass(int64_t size) {
  if (size < kPageBytes) return (size + 63) / 64 * 64;
  return (size + kPageBytes - 1) / kPageBytes * kPageBytes;
}
#ifdef MADV_POPULATE_WRITE
constexpr int kMadvPopulateWrite = MADV_POPULATE_WRITE;
#else
constexpr int kMadvPopulateWrite = 23;  // Linux's value; older headers lack the name
#endif
#ifdef MADV_POPULATE_READ
constexpr int kMadvPopulateRead = MADV_POPULATE_READ;
#else
constexpr int kMadvPopulateRead = 22;
#endif
alignas(64) uint8_t zero_size_area[64];
// Recycled files a pool opens at most per new segment (see TakeRecycled).
constexpr int kRecycleTriesMax = 4;
// Segments taken from the recycle directory by every pool of this process, and their bytes.
std::atomic<int64_t> g_recycled_segments{0};
std::atomic<int64_t> g_recycled_bytes{0};

struct Segment {
  uint8_t* base;
  int64_t length;
  int64_t used;
  int64_t live;
  int fd;
  std::string path;
  bool retired;  // belongs to an earlier node of a reused process (see Restart)
  bool own = false;  // holds one large block (see kOwnSegmentBytesMinDefault)
};

class ShmPool : public arrow::MemoryPool {
 public:
  ShmPool(std::string dir, std::string prefix, int64_t segment_bytes, bool reuse_freed,
          int64_t own_segment_bytes_min = kOwnSegmentBytesMinDefault)
      : dir_(std::move(dir)),
        prefix_(std::move(prefix)),
        segment_bytes_(segment_bytes),
        own_segment_bytes_min_(own_segment_bytes_min),
        reuse_freed_(reuse_freed) {}

  arrow::Status Allocate(int64_t size, int64_t alignment, uint8_t** out) override {
    if (size < 0) return arrow::Status::Invalid("negative allocation size");
    if (size == 0) {
      *out = zero_size_area;
      return arrow::Status::OK();
    }
    bool reused = false;
    bool own = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      reused = TakeFreed(size, alignment, out);
      requested_ = size;
      if (!reused) ARROW_RETURN_NOT_OK(AllocateLocked(size, alignment, out, &own));
    }
    if (reused) return arrow::Status::OK();  // its pages are there already
    // A block of its own is often a kernel's upper bound, shrunk once filled (utf8_upper
    // reserves 1.5x its input): its pages are faulted in as they are written, not populated,
    // and a reused one has its pages already.
    if (own) return arrow::Status::OK();
    // Shared memory gets no transparent huge pages here (shmem_enabled is usually `never`), so
    // a large buffer would take one page fault per 4 KiB as the kernel fills it; populating
    // the range in one call costs the same zeroing without the faults (Linux 5.14+; ignored
    // where unsupported).
    if (size >= kPopulateBytesMin) Populate(*out, size);
    return arrow::Status::OK();
  }

  static void Populate(uint8_t* start, int64_t size) {
    uintptr_t first = reinterpret_cast<uintptr_t>(start) / kPageBytes * kPageBytes;
    uintptr_t end = reinterpret_cast<uintptr_t>(start) + static_cast<uintptr_t>(size);
    ::madvise(reinterpret_cast<void*>(first), end - first, kMadvPopulateWrite);
  }

  // A freed block of the same size class, while the node runs: its pages are already there, so
  // a kernel's temporaries cost no page faults or zeroing the second time (what jemalloc's
  // reuse gives anonymous memory). Off with reuse_freed=false (every block fresh, freed
  // blocks punched at once).
  bool TakeFreed(int64_t size, int64_t alignment, uint8_t** out) {
    if (frozen_ || !reuse_freed_) return false;
    auto it = free_.find(SizeClass(size));
    if (it == free_.end() || it->second.empty()) return false;
    std::vector<uint8_t*>& blocks = it->second;
    for (size_t i = blocks.size(); i-- > 0;) {
      uint8_t* p = blocks[i];
      if (reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(alignment) != 0) continue;
      Segment* seg = SegmentOf(p);
      if (seg == nullptr) continue;
      blocks[i] = blocks.back();
      blocks.pop_back();
      free_bytes_ -= it->first;
      seg->live += size;
      *out = p;
      bytes_allocated_ += size;
      total_allocated_ += size;
      num_allocations_ += 1;
      return true;
    }
    return false;
  }

  // A segment of its own whose block was freed while the node runs, the smallest that holds
  // `size` (a class): its pages are warm, as a large extent jemalloc keeps for the next
  // request of any size that fits, where the class free list would need the same class.
  bool TakeOwnFreed(int64_t size, uint8_t** out) {
    if (frozen_ || !reuse_freed_) return false;
    size_t best = own_free_.size();
    for (size_t i = 0; i < own_free_.size(); ++i) {
      Segment* s = own_free_[i];
      if (s->length >= size && (best == own_free_.size() || s->length < own_free_[best]->length)) {
        best = i;
      }
    }
    if (best == own_free_.size()) return false;
    Segment* seg = own_free_[best];
    own_free_[best] = own_free_.back();
    own_free_.pop_back();
    free_bytes_ -= seg->used;
    seg->used = size;
    seg->live += requested_;
    *out = seg->base;
    bytes_allocated_ += requested_;
    total_allocated_ += requested_;
    num_allocations_ += 1;
    return true;
  }

  Segment* SegmentOf(uint8_t* p) {
    for (Segment& s : segments_) {
      if (p >= s.base && p < s.base + s.length) return &s;
    }
    return nullptr;
  }

  arrow::Status AllocateLocked(int64_t size, int64_t alignment, uint8_t** out,
                               bool* own_out = nullptr) {
    size = SizeClass(size);
    Segment* seg = current_;
    int64_t start = 0;
    if (seg != nullptr) start = (seg->used + alignment - 1) / alignment * alignment;
    bool own = own_segment_bytes_min_ > 0 && size >= own_segment_bytes_min_ &&
               size <= segment_bytes_ / 2;
    if (own_out != nullptr) *own_out = own;
    if (own && TakeOwnFreed(size, out)) return arrow::Status::OK();
    if (seg == nullptr || start + size > seg->length || own) {
      if (closed_) return arrow::Status::OutOfMemory("shared memory pool is closed");
      int64_t want = size > segment_bytes_ / 2 ? size : segment_bytes_;
      if (own) want = 2 * size;
      want = (want + kPageBytes - 1) / kPageBytes * kPageBytes;
      ARROW_RETURN_NOT_OK(NewSegment(want, &seg));
      seg->own = own;
      if (size <= segment_bytes_ / 2 && !own) current_ = seg;
      start = 0;
    }
    seg->used = start + size;  // a whole class
    seg->live += requested_;
    *out = seg->base + start;
    bytes_allocated_ += requested_;
    total_allocated_ += requested_;
    num_allocations_ += 1;
    return arrow::Status::OK();
  }

  arrow::Status Reallocate(int64_t old_size, int64_t new_size, int64_t alignment,
                           uint8_t** ptr) override {
    uint8_t* grown_from = nullptr;  // a range grown in place, populated after the lock
    int64_t grown_bytes = 0;
    if (*ptr != zero_size_area && old_size > 0 && new_size > 0) {
      std::unique_lock<std::mutex> lock(mu_);
      // Builders grow their newest buffer again and again: when it is the last allocation of
      // its segment, grow (or shrink) it where it is instead of copying it (what jemalloc does
      // with mremap for large blocks).
      for (Segment& s : segments_) {
        if (*ptr < s.base || *ptr >= s.base + s.length) continue;
        int64_t offset = *ptr - s.base;
        if (offset + SizeClass(old_size) == s.used && offset + SizeClass(new_size) <= s.length) {
          s.used = offset + SizeClass(new_size);
          s.live += new_size - old_size;
          bytes_allocated_ += new_size - old_size;
          if (new_size > old_size) {
            total_allocated_ += new_size - old_size;
            grown_from = *ptr + old_size;
            grown_bytes = new_size - old_size;
          }
          lock.unlock();
          if (grown_bytes >= kPopulateBytesMin) Populate(grown_from, grown_bytes);
          return arrow::Status::OK();
        }
        if (new_size <= old_size) {  // shrinking elsewhere: keep the block, forget the tail
          s.live -= old_size - new_size;
          bytes_allocated_ -= old_size - new_size;
          return arrow::Status::OK();
        }
        break;
      }
    }
    uint8_t* fresh = nullptr;
    ARROW_RETURN_NOT_OK(Allocate(new_size, alignment, &fresh));
    if (old_size > 0 && new_size > 0) {
      std::memcpy(fresh, *ptr, static_cast<size_t>(old_size < new_size ? old_size : new_size));
    }
    Free(*ptr, old_size, alignment);
    *ptr = fresh;
    return arrow::Status::OK();
  }

  void Free(uint8_t* buffer, int64_t size, int64_t /*alignment*/) override {
    if (buffer == zero_size_area || size == 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    bytes_allocated_ -= size;
    for (Segment& s : segments_) {
      if (buffer >= s.base && buffer < s.base + s.length) {
        s.live -= size;
        if (frozen_ || s.retired) return;
        if (s.own && s.live <= 0) {
          // Its one block: the whole segment waits, pages and all, for the next large request
          // that fits (TakeOwnFreed), within the same bound as freed blocks.
          s.live = 0;
          if (reuse_freed_ && free_bytes_ + s.used <= kFreeCacheMax) {
            own_free_.push_back(&s);
            free_bytes_ += s.used;
            return;
          }
          Punch(s, 0, s.length);
          return;
        }
        int64_t cls = SizeClass(size);
        if (reuse_freed_ && free_bytes_ + cls <= kFreeCacheMax) {
          free_[cls].push_back(buffer);
          free_bytes_ += cls;
          return;
        }
        Punch(s, buffer - s.base, size);
        return;
      }
    }
  }

  int64_t bytes_allocated() const override { return bytes_allocated_; }
  int64_t total_bytes_allocated() const override { return total_allocated_; }
  int64_t num_allocations() const override { return num_allocations_; }
  std::string backend_name() const override { return "attune-shm"; }

  // Before sharing: nothing is punched from here on (a shared buffer keeps its pages) and
  // freed blocks are no longer handed out. Their pages go back with everything else the output
  // does not use, in one pass over the segments after sharing (trim / release in shmpool.py).
  void Freeze() {
    std::lock_guard<std::mutex> lock(mu_);
    free_.clear();
    own_free_.clear();
    free_bytes_ = 0;
    frozen_ = true;
  }

  // Returns the whole pages of [offset, offset + length) of the segment at `path` to the kernel.
  bool PunchPath(const std::string& path, int64_t offset, int64_t length) {
    std::lock_guard<std::mutex> lock(mu_);
    for (Segment& s : segments_) {
      if (s.path == path && !s.retired) {
        if (offset < 0 || length < 0 || offset + length > s.length) return false;
        Punch(s, offset, length);
        return true;
      }
    }
    return false;
  }

  // A reused node process starts its next node: every segment of the finished node that holds
  // no live allocation is unmapped and closed (its file belongs to the run directory, which the
  // driver cleans); segments still holding live allocations (a buffer the node's code kept) stay
  // mapped but retired: never bumped into, never reported by Segments(), never punched. Returns [(address, length, path)] of the released segments
  // and sets *retained to the bytes of the retired ones still mapped.
  //
  // Segments named in `recycle` (the output refers to nothing in them) are kept, up to
  // kSpareSegmentsMax of the standard size, mapped with their pages as spares: the next node's
  // first segments are spares renamed, so its allocations touch pages that are already there
  // instead of faulting and zeroing fresh tmpfs pages (the warm memory an allocator such as
  // jemalloc gives a reused worker). They are listed in *recycled.
  //
  // With `defer`, released segments stay mapped until FinishUnmap(): unmapping a large
  // populated range costs a TLB shootdown across the cores the process's threads ran on (tens
  // of milliseconds of wall time per node on a busy VM, a few of CPU), which a worker does
  // after it reported the node. Their address ranges stay taken meanwhile, so nothing new is
  // mapped there; no allocation of the pool is in them any more.
  PyObject* Restart(const std::unordered_set<std::string>& recycle, PyObject* recycled,
                    int64_t* retained, bool defer) {
    std::lock_guard<std::mutex> lock(mu_);
    PyObject* released = PyList_New(0);
    if (released == nullptr) return nullptr;
    std::deque<Segment> kept;
    *retained = 0;
    for (Segment& s : segments_) {
      if (s.live > 0) {
        s.retired = true;
        *retained += s.length;
        kept.push_back(s);
        continue;
      }
      bool spare = !s.retired && recycle.count(s.path) > 0 &&
                   spares_.size() < kSpareSegmentsMax &&
                   SpareBytes() + s.length <= 2 * segment_bytes_;
      std::string parked_path;
      if (spare && !spare_dir_.empty()) {
        // A pool whose process outlives runs parks its spares in a directory of its own: the
        // run's directory is removed when the run ends, and an unlinked file cannot be renamed
        // into the next run's.
        // The directory is the pool's, shared by all its workers: the name carries this
        // process's id, and a rename never replaces a file (another worker's spare replaced
        // would leave that worker writing into an unlinked file while its name, taken by the
        // next node, pointed readers at this one's pages).
        std::string parked = spare_dir_ + "/spare." + std::to_string(::getpid()) + "." +
                             std::to_string(next_spare_++);
        if (RenameNoReplace(s.path, parked)) {
          parked_path = parked;
        } else {
          spare = false;
        }
      }
      PyObject* t = Py_BuildValue("(KLs)", reinterpret_cast<unsigned long long>(s.base),
                                  static_cast<long long>(s.length), s.path.c_str());
      if (t == nullptr || PyList_Append(spare ? recycled : released, t) != 0) {
        Py_XDECREF(t);
        Py_DECREF(released);
        return nullptr;
      }
      Py_DECREF(t);
      if (spare) {
        if (!parked_path.empty()) s.path = parked_path;
        spares_.push_back(s);
        continue;
      }
      if (defer) {
        unmap_later_.push_back(s);
        continue;
      }
      ::munmap(s.base, static_cast<size_t>(s.length));
      ::close(s.fd);
    }
    segments_.swap(kept);
    free_.clear();
    own_free_.clear();
    free_bytes_ = 0;
    current_ = nullptr;
    frozen_ = false;
    return released;
  }

  // Unmaps the segments a deferred Restart released (idempotent).
  void FinishUnmap() {
    std::vector<Segment> later;
    {
      std::lock_guard<std::mutex> lock(mu_);
      later.swap(unmap_later_);
    }
    for (Segment& s : later) {
      ::munmap(s.base, static_cast<size_t>(s.length));
      ::close(s.fd);
    }
  }

  // A detached pool (a DeCache entry's decode) is done: segments holding no live allocation
  // are unmapped and closed (their files stay: the entry's data files); later allocations
  // fail. Returns the bytes of segments still mapped because something holds a buffer.
  int64_t Close() {
    std::lock_guard<std::mutex> lock(mu_);
    int64_t retained = 0;
    std::deque<Segment> kept;
    for (Segment& s : segments_) {
      if (s.live > 0) {
        s.retired = true;
        retained += s.length;
        kept.push_back(s);
        continue;
      }
      ::munmap(s.base, static_cast<size_t>(s.length));
      ::close(s.fd);
    }
    segments_.swap(kept);
    free_.clear();
    own_free_.clear();
    free_bytes_ = 0;
    current_ = nullptr;
    frozen_ = true;
    closed_ = true;
    return retained;
  }

  // Names the segments of the next node PREFIX.0, PREFIX.1, ...
  void SetPrefix(const std::string& prefix) {
    std::lock_guard<std::mutex> lock(mu_);
    prefix_ = prefix;
    next_index_ = 0;
  }

  // Where dropped tables' files wait to be recycled ("" = take none; see TakeRecycled).
  void SetRecycleDir(const std::string& dir) {
    std::lock_guard<std::mutex> lock(mu_);
    recycle_dir_ = dir;
  }

  // A process that outlives runs: the next node's segments go to `dir` (the next run's
  // directory); spares are parked in `spare_dir` between nodes ("" = kept where they are).
  void SetDirs(const std::string& dir, const std::string& spare_dir) {
    std::lock_guard<std::mutex> lock(mu_);
    dir_ = dir;
    spare_dir_ = spare_dir;
  }

  PyObject* Segments() {
    std::lock_guard<std::mutex> lock(mu_);
    PyObject* list = PyList_New(0);
    if (list == nullptr) return nullptr;
    for (const Segment& s : segments_) {
      if (s.retired) continue;
      PyObject* t = Py_BuildValue("(KLs)", reinterpret_cast<unsigned long long>(s.base),
                                  static_cast<long long>(s.length), s.path.c_str());
      if (t == nullptr || PyList_Append(list, t) != 0) {
        Py_XDECREF(t);
        Py_DECREF(list);
        return nullptr;
      }
      Py_DECREF(t);
    }
    return list;
  }

 private:
  int64_t SpareBytes() const {
    int64_t n = 0;
    for (const Segment& s : spares_) n += s.length;
    return n;
  }

  // rename(2) that never replaces an existing file (false when `to` exists or `from` is gone).
  static bool RenameNoReplace(const std::string& from, const std::string& to) {
    return ::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0;
  }

  // The smallest spare of at least `length` bytes (its pages are warm), else spares_.end().
  std::vector<Segment>::iterator BestSpare(int64_t length) {
    auto best = spares_.end();
    for (auto it = spares_.begin(); it != spares_.end(); ++it) {
      if (it->length >= length && (best == spares_.end() || it->length < best->length)) best = it;
    }
    return best;
  }

  arrow::Status NewSegment(int64_t length, Segment** out) {
    std::string path = dir_ + "/" + prefix_ + "." + std::to_string(next_index_++);
    auto taken = BestSpare(length);
    if (taken != spares_.end()) {
      Segment s = *taken;
      spares_.erase(taken);
      if (RenameNoReplace(s.path, path)) {
        s.path = path;
        s.used = 0;
        s.live = 0;
        s.retired = false;
        segments_.push_back(s);
        *out = &segments_.back();
        return arrow::Status::OK();
      }
      // Its file is gone (its directory was removed), on another file system, or the name is
      // taken (then the open below fails as well): drop it.
      if (errno == EEXIST) ::unlink(s.path.c_str());
      ::munmap(s.base, static_cast<size_t>(s.length));
      ::close(s.fd);
    }
    if (TakeRecycled(length, path, out)) return arrow::Status::OK();
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return arrow::Status::OutOfMemory("cannot create shared segment ", path);
    if (::ftruncate(fd, length) != 0) {
      ::close(fd);
      ::unlink(path.c_str());
      return arrow::Status::OutOfMemory("cannot size shared segment ", path);
    }
    void* p = ::mmap(nullptr, static_cast<size_t>(length), PROT_READ | PROT_WRITE, MAP_SHARED,
                     fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      ::unlink(path.c_str());
      return arrow::Status::OutOfMemory("cannot map shared segment ", path);
    }
    segments_.push_back(Segment{static_cast<uint8_t*>(p), length, 0, 0, fd, path, false});
    *out = &segments_.back();  // the caller decides whether it becomes the bump segment
    return arrow::Status::OK();
  }

  // A file of a dropped table that the driver moved to the recycle directory (named
  // `<bytes>.<pid>.<n>`, attune.pipelines.recycle) becomes this segment, its pages still there:
  // the smallest that holds `length`. Claimed by renaming it to `path` (no other pool can take it
  // then, and no new reader can open it: only dropped tables' files are put there), then checked
  // by a write lease: F_SETLEASE F_WRLCK is granted only when no other open file refers to the
  // inode, and every reader's or writer's mapping holds its open file, so a granted lease
  // proves that nobody maps the file any more and nobody can see its bytes change. The lease is
  // let go at once (nobody can open the file meanwhile: its name is this pool's). A file still
  // mapped somewhere goes back under its name, for a later try. Without lease support (EINVAL,
  // leases disabled) nothing is recycled by this pool and the file is removed.
  bool TakeRecycled(int64_t length, const std::string& path, Segment** out) {
    if (recycle_dir_.empty()) return false;
    DIR* d = ::opendir(recycle_dir_.c_str());
    if (d == nullptr) return false;
    std::vector<std::pair<int64_t, std::string>> fits;
    while (struct dirent* e = ::readdir(d)) {
      char* end = nullptr;
      long long bytes = std::strtoll(e->d_name, &end, 10);
      if (end == e->d_name || *end != '.' || bytes < length) continue;
      fits.emplace_back(bytes, e->d_name);
    }
    ::closedir(d);
    std::sort(fits.begin(), fits.end());
    int tries = 0;
    for (const auto& [bytes, name] : fits) {
      if (tries++ >= kRecycleTriesMax) break;
      std::string from = recycle_dir_ + "/" + name;
      if (!RenameNoReplace(from, path)) continue;  // another pool took it
      int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NONBLOCK);
      if (fd < 0) {
        ::unlink(path.c_str());
        continue;
      }
      if (::fcntl(fd, F_SETLEASE, F_WRLCK) != 0) {
        int err = errno;
        ::close(fd);
        if (err == EAGAIN || err == EWOULDBLOCK) {
          // Still mapped (or open) elsewhere: its pages are someone's table. Back it goes.
          if (!RenameNoReplace(path, from)) ::unlink(path.c_str());
          continue;
        }
        ::unlink(path.c_str());
        recycle_dir_.clear();  // no leases here: recycling cannot be made safe
        return false;
      }
      ::fcntl(fd, F_SETLEASE, F_UNLCK);
      struct stat st;
      if (::fstat(fd, &st) != 0) {
        ::close(fd);
        ::unlink(path.c_str());
        continue;
      }
      int64_t size = (std::max<int64_t>(st.st_size, length) + kPageBytes - 1) / kPageBytes *
                     kPageBytes;
      if (size != st.st_size && ::ftruncate(fd, size) != 0) {
        ::close(fd);
        ::unlink(path.c_str());
        continue;
      }
      void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE, MAP_SHARED,
                       fd, 0);
      if (p == MAP_FAILED) {
        ::close(fd);
        ::unlink(path.c_str());
        continue;
      }
      MapPages(fd, static_cast<uint8_t*>(p), size);
      segments_.push_back(Segment{static_cast<uint8_t*>(p), size, 0, 0, fd, path, false});
      *out = &segments_.back();
      g_recycled_segments += 1;
      g_recycled_bytes += st.st_blocks * 512;  // the warm pages it brought
      return true;
    }
    return false;
  }

  // Maps the pages a recycled file holds (its data ranges, not its holes) into this process in
  // one call per range: a read fault on a page the file has maps it writable (a shared
  // mapping of tmpfs needs no write notification), sixteen pages at a time with fault-around,
  // where writing it would take a fault per page. Measured on a 64 MiB file, every page written
  // once: 0.012 s of CPU after this, 0.045 s without, 0.075-0.095 s for fresh pages.
  static void MapPages(int fd, uint8_t* base, int64_t size) {
    off_t pos = 0;
    while (pos < size) {
      off_t data = ::lseek(fd, pos, SEEK_DATA);
      if (data < 0 || data >= size) break;
      off_t hole = ::lseek(fd, data, SEEK_HOLE);
      if (hole < 0 || hole > size) hole = size;
      ::madvise(base + data, static_cast<size_t>(hole - data), kMadvPopulateRead);
      pos = hole;
    }
  }

  void Punch(Segment& s, int64_t offset, int64_t size) {
    int64_t first = (offset + kPageBytes - 1) / kPageBytes * kPageBytes;
    int64_t last = (offset + size) / kPageBytes * kPageBytes;
    if (last > first) {
      ::fallocate(s.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, first, last - first);
    }
  }

  std::mutex mu_;
  std::string dir_;
  std::string prefix_;
  std::string spare_dir_;
  std::string recycle_dir_;
  int64_t next_spare_ = 0;
  int64_t segment_bytes_;
  int64_t own_segment_bytes_min_;
  std::deque<Segment> segments_;  // deque: references stay valid as it grows
  std::vector<Segment> spares_;   // kept by Restart for the next node
  std::vector<Segment*> own_free_;  // segments of their own whose block was freed (this node)
  std::vector<Segment> unmap_later_;  // released by a deferred Restart, still mapped
  Segment* current_ = nullptr;
  bool frozen_ = false;
  bool closed_ = false;  // a detached pool after Close(): allocates nothing more
  bool reuse_freed_ = true;
  std::unordered_map<int64_t, std::vector<uint8_t*>> free_;  // size class -> freed blocks
  int64_t free_bytes_ = 0;
  int64_t requested_ = 0;  // the size AllocateLocked is serving (its block is a whole class)
  int64_t next_index_ = 0;
  int64_t bytes_allocated_ = 0;
  int64_t total_allocated_ = 0;
  int64_t num_allocations_ = 0;
};

// One pool per process (a node process installs it once).
ShmPool* g_pool = nullptr;

PyObject* create(PyObject*, PyObject* args) {
  const char* dir;
  const char* prefix;
  long long segment_bytes;
  int reuse_freed = 1;
  long long own_segment_bytes_min = kOwnSegmentBytesMinDefault;
  if (!PyArg_ParseTuple(args, "ssL|pL", &dir, &prefix, &segment_bytes, &reuse_freed,
                        &own_segment_bytes_min)) {
    return nullptr;
  }
  if (g_pool != nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "a shared memory pool already exists in this process");
    return nullptr;
  }
  if (segment_bytes < kPageBytes) {
    PyErr_SetString(PyExc_ValueError, "segment_bytes must be at least one page");
    return nullptr;
  }
  // Lives as long as the process.
  g_pool = new ShmPool(dir, prefix, segment_bytes, reuse_freed != 0, own_segment_bytes_min);
  return box_memory_pool(g_pool);
}

PyObject* freeze(PyObject*, PyObject*) {
  if (g_pool != nullptr) g_pool->Freeze();
  Py_RETURN_NONE;
}

PyObject* restart(PyObject*, PyObject* args) {
  PyObject* paths = nullptr;
  int defer = 0;
  if (!PyArg_ParseTuple(args, "|Op", &paths, &defer)) return nullptr;
  if (g_pool == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "no shared memory pool in this process");
    return nullptr;
  }
  std::unordered_set<std::string> recycle;
  if (paths != nullptr) {
    PyObject* it = PyObject_GetIter(paths);
    if (it == nullptr) return nullptr;
    while (PyObject* item = PyIter_Next(it)) {
      const char* text = PyUnicode_AsUTF8(item);
      if (text != nullptr) recycle.insert(text);
      Py_DECREF(item);
      if (text == nullptr) {
        Py_DECREF(it);
        return nullptr;
      }
    }
    Py_DECREF(it);
    if (PyErr_Occurred()) return nullptr;
  }
  PyObject* recycled = PyList_New(0);
  if (recycled == nullptr) return nullptr;
  int64_t retained = 0;
  PyObject* released = g_pool->Restart(recycle, recycled, &retained, defer != 0);
  if (released == nullptr) {
    Py_DECREF(recycled);
    return nullptr;
  }
  return Py_BuildValue("(NNL)", released, recycled, static_cast<long long>(retained));
}

PyObject* finish_unmap(PyObject*, PyObject*) {
  if (g_pool != nullptr) g_pool->FinishUnmap();
  Py_RETURN_NONE;
}

PyObject* set_prefix(PyObject*, PyObject* args) {
  const char* prefix;
  if (!PyArg_ParseTuple(args, "s", &prefix)) return nullptr;
  if (g_pool == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "no shared memory pool in this process");
    return nullptr;
  }
  g_pool->SetPrefix(prefix);
  Py_RETURN_NONE;
}

PyObject* set_dirs(PyObject*, PyObject* args) {
  const char* dir;
  const char* spare_dir;
  if (!PyArg_ParseTuple(args, "ss", &dir, &spare_dir)) return nullptr;
  if (g_pool == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "no shared memory pool in this process");
    return nullptr;
  }
  g_pool->SetDirs(dir, spare_dir);
  Py_RETURN_NONE;
}

PyObject* set_recycle_dir(PyObject*, PyObject* args) {
  const char* dir;
  if (!PyArg_ParseTuple(args, "s", &dir)) return nullptr;
  if (g_pool == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "no shared memory pool in this process");
    return nullptr;
  }
  g_pool->SetRecycleDir(dir);
  Py_RETURN_NONE;
}

PyObject* recycled(PyObject*, PyObject*) {
  return Py_BuildValue("(LL)", static_cast<long long>(g_recycled_segments.load()),
                       static_cast<long long>(g_recycled_bytes.load()));
}

// Punches whole pages of a file by path (a released segment: no longer mapped here).
PyObject* punch_file(PyObject*, PyObject* args) {
  const char* path;
  long long offset;
  long long length;
  if (!PyArg_ParseTuple(args, "sLL", &path, &offset, &length)) return nullptr;
  int fd = ::open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return PyErr_SetFromErrnoWithFilename(PyExc_OSError, path);
  long long first = (offset + kPageBytes - 1) / kPageBytes * kPageBytes;
  long long last = (offset + length) / kPageBytes * kPageBytes;
  if (last > first) ::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, first, last - first);
  ::close(fd);
  Py_RETURN_NONE;
}

PyObject* segments(PyObject*, PyObject*) {
  if (g_pool == nullptr) return PyList_New(0);
  return g_pool->Segments();
}

PyObject* punch(PyObject*, PyObject* args) {
  const char* path;
  long long offset;
  long long length;
  if (!PyArg_ParseTuple(args, "sLL", &path, &offset, &length)) return nullptr;
  if (g_pool == nullptr || !g_pool->PunchPath(path, offset, length)) {
    PyErr_SetString(PyExc_ValueError, "no such segment range");
    return nullptr;
  }
  Py_RETURN_NONE;
}

// Detached pools: a pool of its own over files in another directory (a DeCache entry), used
// only where a caller passes it explicitly, so a decode writes straight into the entry's files.
// The C++ object is never deleted (a pyarrow buffer may still name it as its pool); Close()
// unmaps its segments, so what stays behind per pool is a few hundred bytes.
constexpr const char* kCapsuleName = "attune.shmpool.detached";

ShmPool* Detached(PyObject* handle) {
  return static_cast<ShmPool*>(PyCapsule_GetPointer(handle, kCapsuleName));
}

PyObject* create_detached(PyObject*, PyObject* args) {
  const char* dir;
  const char* prefix;
  long long segment_bytes;
  int reuse_freed = 1;
  const char* recycle_dir = "";
  if (!PyArg_ParseTuple(args, "ssL|ps", &dir, &prefix, &segment_bytes, &reuse_freed,
                        &recycle_dir)) {
    return nullptr;
  }
  if (segment_bytes < kPageBytes) {
    PyErr_SetString(PyExc_ValueError, "segment_bytes must be at least one page");
    return nullptr;
  }
  ShmPool* pool = new ShmPool(dir, prefix, segment_bytes, reuse_freed != 0);
  pool->SetRecycleDir(recycle_dir);
  PyObject* handle = PyCapsule_New(pool, kCapsuleName, nullptr);
  if (handle == nullptr) return nullptr;
  PyObject* boxed = box_memory_pool(pool);
  if (boxed == nullptr) {
    Py_DECREF(handle);
    return nullptr;
  }
  return Py_BuildValue("(NN)", handle, boxed);
}

PyObject* detached_segments(PyObject*, PyObject* args) {
  PyObject* handle;
  if (!PyArg_ParseTuple(args, "O", &handle)) return nullptr;
  ShmPool* pool = Detached(handle);
  return pool == nullptr ? nullptr : pool->Segments();
}

PyObject* detached_freeze(PyObject*, PyObject* args) {
  PyObject* handle;
  if (!PyArg_ParseTuple(args, "O", &handle)) return nullptr;
  ShmPool* pool = Detached(handle);
  if (pool == nullptr) return nullptr;
  pool->Freeze();
  Py_RETURN_NONE;
}

PyObject* detached_punch(PyObject*, PyObject* args) {
  PyObject* handle;
  const char* path;
  long long offset;
  long long length;
  if (!PyArg_ParseTuple(args, "OsLL", &handle, &path, &offset, &length)) return nullptr;
  ShmPool* pool = Detached(handle);
  if (pool == nullptr) return nullptr;
  if (!pool->PunchPath(path, offset, length)) {
    PyErr_SetString(PyExc_ValueError, "no such segment range");
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* detached_close(PyObject*, PyObject* args) {
  PyObject* handle;
  if (!PyArg_ParseTuple(args, "O", &handle)) return nullptr;
  ShmPool* pool = Detached(handle);
  if (pool == nullptr) return nullptr;
  return PyLong_FromLongLong(static_cast<long long>(pool->Close()));
}

PyMethodDef kMethods[] = {
    {"create_detached", create_detached, METH_VARARGS,
     "create_detached(dir, prefix, segment_bytes, reuse_freed=True, recycle_dir='') -> "
     "(handle, MemoryPool)"},
    {"detached_segments", detached_segments, METH_VARARGS, "detached_segments(handle)"},
    {"detached_freeze", detached_freeze, METH_VARARGS, "detached_freeze(handle)"},
    {"detached_punch", detached_punch, METH_VARARGS,
     "detached_punch(handle, path, offset, length)"},
    {"detached_close", detached_close, METH_VARARGS,
     "detached_close(handle) -> bytes still mapped (live buffers)"},
    {"punch", punch, METH_VARARGS, "punch(path, offset, length): free whole pages of a range"},
    {"create", create, METH_VARARGS,
     "create(dir, prefix, segment_bytes, reuse_freed=True, own_segment_bytes_min=4 MiB) -> "
     "pyarrow.MemoryPool"},
    {"restart", restart, METH_VARARGS,
     "restart(recycle_paths=(), defer=False) -> (released, recycled, retained bytes): after a "
     "node; deferred: released segments stay mapped until finish_unmap()"},
    {"finish_unmap", finish_unmap, METH_NOARGS, "unmaps what a deferred restart released"},
    {"set_prefix", set_prefix, METH_VARARGS, "set_prefix(prefix): names the next segments"},
    {"set_dirs", set_dirs, METH_VARARGS,
     "set_dirs(dir, spare_dir): where the next segments go and spares wait"},
    {"set_recycle_dir", set_recycle_dir, METH_VARARGS,
     "set_recycle_dir(dir): where dropped tables' files wait to be recycled ('' = none)"},
    {"recycled", recycled, METH_NOARGS,
     "recycled() -> (segments, bytes) taken from recycle directories by this process"},
    {"punch_file", punch_file, METH_VARARGS, "punch_file(path, offset, length): whole pages"},
    {"freeze", freeze, METH_NOARGS, "stop returning freed pages (before sharing)"},
    {"segments", segments, METH_NOARGS, "[(address, length, path)] of every segment"},
    {nullptr, nullptr, 0, nullptr},
};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_attune_shmpool", nullptr, -1, kMethods};

}  // namespace

PyMODINIT_FUNC PyInit__attune_shmpool() {
  if (import_pyarrow__lib() != 0) return nullptr;
  return PyModule_Create(&kModule);
}
