// The MPI backend: Open MPI's collectives on MPI_COMM_WORLD. Processes are started by mpirun
// (OMPI_COMM_WORLD_* in the environment). Errors come back as codes (MPI_ERRORS_RETURN) and
// become dsinfer::Error. A rank that fails leaves without MPI_Finalize, so mpirun tears the
// whole job down instead of the others waiting in a collective forever.
#include "comm/backends.h"
#include "core/error.h"

#ifdef DSINFER_HAVE_MPI

#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <exception>

namespace dsinfer {

namespace {

void mpi_check(int code, const char* what) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) len = 0;
  throw CommError(cat("MPI: ", what, " failed: ", std::string(text, static_cast<size_t>(len))));
}

// Open MPI keeps what MPI_Init allocates in its dlopen'ed components, which MPI_Finalize unloads:
// LeakSanitizer (the sanitizer suite) would report it with frames it can no longer name, so
// those two calls run with leak tracking off. Our own allocations stay checked.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DSINFER_LSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define DSINFER_LSAN 1
#endif
#ifdef DSINFER_LSAN
#include <sanitizer/lsan_interface.h>
struct UntrackedAllocations {
  UntrackedAllocations() { __lsan_disable(); }
  ~UntrackedAllocations() { __lsan_enable(); }
};
// Sanitizer builds only: libraries are never unloaded, so that what Open MPI's components keep
// until exit is reported with frames LeakSanitizer can name (and tests/sanitizers/lsan.supp can
// match) instead of "<unknown module>". Our own code never unloads anything.
extern "C" int dlclose(void*) { return 0; }
#else
struct UntrackedAllocations {};
#endif

// MPI counts are int: long buffers go in pieces.
constexpr int64_t kMaxCount = INT_MAX / 2;

class MpiComm final : public Comm {
 public:
  MpiComm() {
    const UntrackedAllocations untracked;
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      // Containers usually lack ptrace rights, which Open MPI's shared-memory single copy (CMA)
      // needs; plain copy-in/copy-out works everywhere. The environment may still choose.
      setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", /*overwrite=*/0);
      int provided = 0;
      mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided),
                "MPI_Init_thread");
      owns_init_ = true;
    }
    mpi_check(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
              "MPI_Comm_set_errhandler");
    mpi_check(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    mpi_check(MPI_Comm_size(MPI_COMM_WORLD, &world_size_), "MPI_Comm_size");
  }
  ~MpiComm() override {
    // During an error's unwinding: no MPI_Finalize (it may wait for ranks that wait for us);
    // the non-zero exit without it makes mpirun stop every rank.
    if (owns_init_ && std::uncaught_exceptions() == 0) {
      const UntrackedAllocations untracked;
      MPI_Finalize();
    }
  }

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  const char* name() const override { return "mpi"; }

  void all_reduce_sum(float* data, int64_t n) override {
    for (int64_t done = 0; done < n;) {
      const int count = static_cast<int>(std::min(n - done, kMaxCount));
      mpi_check(MPI_Allreduce(MPI_IN_PLACE, data + done, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
                "MPI_Allreduce");
      done += count;
    }
  }

  void all_gather(const float* in, int64_t n, float* out) override {
    check(n <= kMaxCount, "MPI: all_gather of ", n, " floats per rank is too long");
    const bool in_place = in == out + static_cast<int64_t>(rank_) * n;
    mpi_check(MPI_Allgather(in_place ? MPI_IN_PLACE : in, static_cast<int>(n), MPI_FLOAT, out,
                            static_cast<int>(n), MPI_FLOAT, MPI_COMM_WORLD),
              "MPI_Allgather");
  }

  void broadcast(std::string& bytes, int root) override {
    check(root >= 0 && root < world_size_, "MPI: broadcast from rank ", root, " of ", world_size_);
    uint64_t size = bytes.size();
    mpi_check(MPI_Bcast(&size, 1, MPI_UINT64_T, root, MPI_COMM_WORLD), "MPI_Bcast");
    bytes.resize(size);
    for (uint64_t done = 0; done < size;) {
      const int count = static_cast<int>(std::min<uint64_t>(size - done, kMaxCount));
      mpi_check(MPI_Bcast(bytes.data() + done, count, MPI_CHAR, root, MPI_COMM_WORLD), "MPI_Bcast");
      done += count;
    }
  }

  void barrier() override { mpi_check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }

 private:
  int rank_ = 0;
  int world_size_ = 1;
  bool owns_init_ = false;
};

}  // namespace

bool mpi_built() { return true; }

std::unique_ptr<Comm> make_mpi_comm() { return std::make_unique<MpiComm>(); }

}  // namespace dsinfer

#else  // !DSINFER_HAVE_MPI

namespace dsinfer {
bool mpi_built() { return false; }

std::unique_ptr<Comm> make_mpi_comm() {
  fail("this dsinfer was built without MPI (install libopenmpi-dev and openmpi-bin, then rebuild)");
}
}  // namespace dsinfer

#endif
