// What a submission's objects may name of the framework (grading/symbols.h): small C++ files
// compiled here with the project's compiler, their symbols read with nm as the grader reads them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "grading/symbols.h"
#include "tools/handout/process.h"

namespace clockwork::grading {
namespace {

namespace fs = std::filesystem;

class Symbols : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("clockwork-symbols-" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Compiles `code` as the student file `source` and returns what the policy finds in its object.
  std::vector<ForbiddenSymbol> found(const std::string& code, bool checked = false,
                                     const std::string& source = "kernels/embedding.cu") {
    const fs::path src = dir_ / "student.cpp", obj = dir_ / "student.o";
    std::ofstream(src) << code;
    handout::RunOptions cc;
    cc.argv = {CLOCKWORK_CXX, "-std=c++20", "-O2", "-c", src.string(), "-o", obj.string()};
    const handout::RunResult compiled = handout::run_process(cc);
    EXPECT_TRUE(compiled.succeeded()) << compiled.describe() << "\n" << compiled.output;
    handout::RunOptions nm;
    nm.argv = {"nm", "-P", "-g", "-A", obj.string()};
    nm.env["LC_ALL"] = "C";
    const handout::RunResult listed = handout::run_process(nm);
    EXPECT_TRUE(listed.succeeded()) << listed.describe() << "\n" << listed.output;
    return forbidden_symbols(listed.output, {{obj.string(), source, checked}});
  }

  static std::string names(const std::vector<ForbiddenSymbol>& f) {
    std::string s;
    for (const ForbiddenSymbol& x : f) s += (x.defined ? "defines " : "refers to ") + x.symbol + "\n";
    return s;
  }

  fs::path dir_;
};

// What a kernel file really holds: the standard library, the CUDA runtime's calls, the CPU
// backend's inline helpers (weak) and its launch functions.
TEST_F(Symbols, AnOrdinaryKernelFileNamesNothingForbidden) {
  const auto f = found(R"(
#include <string>
#include <vector>
int cudaGetLastError();
namespace cudasim::detail {
inline thread_local int tl_lane = 0;
inline int lane_id() { return tl_lane & 31; }
void launch(const char*, void (*)(void*), void*);
}
extern "C" __attribute__((weak)) void nvtxRangePop_impl_init_v3() {}
int launches = 0;  // a global variable: its name is unmangled, like a C function's
namespace clockwork::kernels {
static void body(void* p) { static_cast<float*>(p)[cudasim::detail::lane_id()] = 1.0f + launches++; }
std::string embedding(std::vector<float>& v) {
  cudasim::detail::launch("embedding", body, v.data());
  return std::to_string(cudaGetLastError()) + "ok";
}
}
)");
  EXPECT_TRUE(f.empty()) << names(f);
}

// The checker's switch, named through a macro so that no reader of the source sees it.
TEST_F(Symbols, SwitchingTheCheckerOffIsFound) {
  const auto f = found(R"(
#define JOIN(a, b) a##b
namespace cudasim::detail::check {
struct ThreadState;
inline thread_local ThreadState* JOIN(tl_, checked) = nullptr;
}
void embedding() { cudasim::detail::check::tl_checked = nullptr; }
)", /*checked=*/true);
  ASSERT_EQ(f.size(), 1u) << names(f);
  EXPECT_EQ(f[0].source, "kernels/embedding.cu");
  EXPECT_EQ(f[0].symbol, "cudasim::detail::check::tl_checked");
  EXPECT_NE(f[0].owner.find("checker"), std::string::npos);
  const std::string message = describe_forbidden(f);
  EXPECT_NE(message.find("kernels/embedding.cu"), std::string::npos) << message;
  EXPECT_NE(message.find("cudasim::detail::check::tl_checked"), std::string::npos) << message;
}

TEST_F(Symbols, CallingTheReferenceIsFound) {
  const auto f = found(R"(
namespace clockwork::ref { void embedding(const int*, float*, int); }
void embedding(const int* ids, float* out, int n) { clockwork::ref::embedding(ids, out, n); }
)");
  ASSERT_EQ(f.size(), 1u) << names(f);
  EXPECT_FALSE(f[0].defined);
  EXPECT_EQ(f[0].symbol, "clockwork::ref::embedding(int const*, float*, int)");
  EXPECT_NE(f[0].owner.find("reference"), std::string::npos);
}

TEST_F(Symbols, LibtorchAndKnownGoodStepsAreFound) {
  const auto f = found(R"(
namespace at { struct Tensor { Tensor matmul(const Tensor&) const; }; }
namespace clockwork::known_good { void matmul(const float*, float*, int); }
void f(const at::Tensor& a, float* out) { a.matmul(a); clockwork::known_good::matmul(nullptr, out, 1); }
)");
  EXPECT_EQ(f.size(), 2u) << names(f);
}

// The instrumentation's names belong in the checked run's objects only, and only as references.
TEST_F(Symbols, InstrumentationNamesOnlyInTheCheckedObjects) {
  const std::string reads = R"(
struct Filter { unsigned long generation; void* words; };
extern "C" __thread Filter __cudasim_read_filter;
unsigned long peek() { return __cudasim_read_filter.generation; }
)";
  EXPECT_EQ(found(reads, /*checked=*/false).size(), 1u);
  EXPECT_TRUE(found(reads, /*checked=*/true).empty());
  const auto defines = found(R"(extern "C" void __tsan_read4(void*) {})", /*checked=*/true);
  ASSERT_EQ(defines.size(), 1u) << names(defines);
  EXPECT_TRUE(defines[0].defined);
  EXPECT_NE(defines[0].owner.find("instrumentation"), std::string::npos);
}

// A definition that would take the place of the CPU backend's or the runtime's own.
// A definition of a library's name takes its place for the tests too: a memcmp that always says
// "equal" (a C name, even weak), a function of the C++ library's or the CPU backend's.
TEST_F(Symbols, ReplacingALibraryFunctionIsFound) {
  const auto f = found(R"(
#include <cstddef>
extern "C" __attribute__((weak)) int memcmp(const void*, const void*, std::size_t) { return 0; }
extern "C" int cudaDeviceSynchronize() { return 0; }
namespace cudasim { int checked_run() { return 0; } }
namespace std { int clockwork_compare(int a) { return a; } }
namespace cudasim::detail { inline int helper() { return 1; } }
static int hidden() { return 2; }
int my_helper(int x) { return x + hidden(); }
int use() { return cudasim::detail::helper() + my_helper(1); }
)");
  EXPECT_EQ(f.size(), 4u) << names(f);
  for (const ForbiddenSymbol& s : f) EXPECT_TRUE(s.defined) << s.symbol;
  for (const char* name : {"memcmp", "cudaDeviceSynchronize", "cudasim::checked_run()", "std::clockwork_compare(int)"}) {
    EXPECT_TRUE(std::any_of(f.begin(), f.end(), [&](const ForbiddenSymbol& s) { return s.symbol == name; }))
        << name << " not found in\n" << names(f);
  }
}

// An ifunc's resolver runs while the program loads, before the hidden tests take their seed.
TEST_F(Symbols, IndirectFunctionsAreFound) {
  const auto f = found(R"(
extern "C" {
static int one() { return 1; }
static int (*resolve())() { return one; }
int early() __attribute__((ifunc("resolve")));
}
)");
  ASSERT_EQ(f.size(), 1u) << names(f);
  EXPECT_NE(f[0].owner.find("ifunc"), std::string::npos) << names(f);
}

TEST(SymbolEntity, StripsWhatSurroundsTheName) {
  EXPECT_EQ(symbol_entity("guard variable for cudasim::detail::check::x"), "cudasim::detail::check::x");
  EXPECT_EQ(symbol_entity("TLS wrapper function for cudasim::detail::check::tl_checked"),
            "cudasim::detail::check::tl_checked");
  EXPECT_EQ(symbol_entity("void cudasim::detail::check::f<int>(int)"), "cudasim::detail::check::f<int>");
  EXPECT_EQ(symbol_entity("std::vector<int, std::allocator<int> > const& clockwork::ref::g<int>(int)"),
            "clockwork::ref::g<int>");
  EXPECT_EQ(symbol_entity("std::basic_ostream<char, std::char_traits<char> >& std::operator<< "
                          "<std::char_traits<char> >(std::basic_ostream<char, std::char_traits<char> >&, char const*)"),
            "std::operator<< <std::char_traits<char> >");
  EXPECT_EQ(symbol_entity("bool at::operator<(at::Tensor const&, at::Tensor const&)"), "at::operator<");
  EXPECT_EQ(symbol_entity("at::Tensor::operator()(long) const"), "at::Tensor::operator()");
}

TEST(ForbiddenSymbols, ReadsEveryLineOrRefuses) {
  const std::vector<StudentObject> objects = {{"a.o", "kernels/matmul.cu", false}};
  EXPECT_TRUE(forbidden_symbols("nm: a.o: no symbols\n", objects).empty());
  EXPECT_THROW(forbidden_symbols("b.o: _Z1fv T 0 1\n", objects), std::runtime_error);
  EXPECT_THROW(forbidden_symbols("a.o: _Z1fv\n", objects), std::runtime_error);
  EXPECT_THROW(forbidden_symbols("nm: a.o: file format not recognized\n", objects), std::runtime_error);
  const auto f = forbidden_symbols("a.o: _ZN9clockwork3ref6matmulEv U\na.o: _ZN9clockwork3ref6matmulEv U\n", objects);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].symbol, "clockwork::ref::matmul()");
  EXPECT_EQ(f[0].source, "kernels/matmul.cu");
}

}  // namespace
}  // namespace clockwork::grading
