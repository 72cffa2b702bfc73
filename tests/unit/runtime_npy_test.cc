// .npy reading and writing: round trips for every dtype, files numpy wrote, and bad files.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "deploy/runtime/npy.h"
#include "tests/common/expect_error.h"
#include "tests/common/temp_dir.h"

namespace kiln::runtime {
namespace {

namespace fs = std::filesystem;

/// A fresh temporary directory, removed with everything in it at the end of the test.
class NpyTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return (dir_.path() / name).string(); }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
  }
  testing::TempDir dir_{"kiln_npy_test"};
};

TEST_F(NpyTest, RoundTripEveryDtype) {
  const KilnDType dtypes[] = {kFloat32, kFloat16, kInt8, kInt32, kInt64, kUInt8, kBool, kFloat64};
  for (KilnDType t : dtypes) {
    NDArray a = NDArray::empty({2, 3, 5}, t);
    auto* p = static_cast<unsigned char*>(a.data());
    for (int64_t i = 0; i < a.nbytes(); ++i) p[i] = static_cast<unsigned char>(i * 7 + 1);
    if (t.bits == 1) {
      for (int64_t i = 0; i < a.nbytes(); ++i) p[i] = i % 3 == 0;
    }
    const std::string file = path(dtype_to_string(t) + ".npy");
    save_npy(file, a);
    EXPECT_EQ(fs::file_size(file) % 64, static_cast<uintmax_t>(a.nbytes()) % 64);  // aligned header
    NDArray b = load_npy(file);
    EXPECT_TRUE(dtype_equal(b.dtype(), t)) << dtype_to_string(t);
    EXPECT_EQ(b.shape(), a.shape());
    ASSERT_EQ(b.nbytes(), a.nbytes());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), static_cast<size_t>(a.nbytes())), 0);
  }
}

TEST_F(NpyTest, ScalarAndOneDimAndEmpty) {
  for (std::vector<int64_t> shape : {std::vector<int64_t>{}, {7}, {0, 4}}) {
    NDArray a = NDArray::empty(shape, kFloat32);
    for (int64_t i = 0; i < a.num_elements(); ++i) a.data<float>()[i] = float(i) * 0.5f;
    save_npy(path("a.npy"), a);
    NDArray b = load_npy(path("a.npy"));
    EXPECT_EQ(b.shape(), shape);
    EXPECT_EQ(b.to_vector<float>(), a.to_vector<float>());
  }
  // The header says what numpy would write.
  std::string bytes = serialize_npy(NDArray::empty({7}, kFloat32));
  EXPECT_NE(bytes.find("{'descr': '<f4', 'fortran_order': False, 'shape': (7,), }"),
            std::string::npos);
  bytes = serialize_npy(NDArray::empty({2, 3}, kUInt8));
  EXPECT_NE(bytes.find("'descr': '|u1'"), std::string::npos);
  EXPECT_NE(bytes.find("'shape': (2, 3)"), std::string::npos);
}

TEST_F(NpyTest, Version2Header) {
  // A hand-made version 2.0 file (4-byte header length).
  std::string header = "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }";
  header.append(64 - (12 + header.size() + 1) % 64, ' ');
  header += "\n";
  std::string bytes = "\x93NUMPY";
  bytes += '\x02';
  bytes += '\x00';
  for (int i = 0; i < 4; ++i) bytes += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  bytes += header;
  const int32_t data[2] = {-5, 123456};
  bytes.append(reinterpret_cast<const char*>(data), sizeof(data));
  write("v2.npy", bytes);
  NDArray a = load_npy(path("v2.npy"));
  EXPECT_EQ(a.to_vector<int32_t>(), (std::vector<int32_t>{-5, 123456}));
}

TEST_F(NpyTest, BadFiles) {
  EXPECT_ERROR_CONTAINS(load_npy(path("missing.npy")), "missing.npy");
  write("magic.npy", "PK\x03\x04 this is a zip file");
  EXPECT_ERROR_CONTAINS(load_npy(path("magic.npy")), "bad magic");
  EXPECT_ERROR_CONTAINS(load_npy(path("magic.npy")), "magic.npy");

  std::string good = serialize_npy(NDArray::empty({4, 4}, kFloat32));
  write("truncated.npy", good.substr(0, good.size() - 5));
  EXPECT_ERROR_CONTAINS(load_npy(path("truncated.npy")), "truncated data");
  EXPECT_ERROR_CONTAINS(load_npy(path("truncated.npy")), "truncated.npy");
  write("truncated_header.npy", good.substr(0, 20));
  EXPECT_ERROR_CONTAINS(load_npy(path("truncated_header.npy")), "truncated header");

  auto replace = [&](std::string s, const std::string& from, const std::string& to) {
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  write("fortran.npy", replace(good, "False", "True "));
  EXPECT_ERROR_CONTAINS(load_npy(path("fortran.npy")), "Fortran");
  write("dtype.npy", replace(good, "<f4", "<c8"));
  EXPECT_ERROR_CONTAINS(load_npy(path("dtype.npy")), "unsupported dtype '<c8'");
  write("bigendian.npy", replace(good, "<f4", ">f4"));
  EXPECT_ERROR_CONTAINS(load_npy(path("bigendian.npy")), "big-endian");
  write("garbled.npy", replace(good, "'shape'", "'shapf'"));
  EXPECT_ERROR_CONTAINS(load_npy(path("garbled.npy")), "bad header");
  // Found by fuzz_npy: the array a header announces was allocated before the data was counted,
  // so a 100-byte file could ask for a terabyte. Now it is refused as truncated.
  std::string huge = serialize_npy(NDArray::empty({4}, kUInt8));
  huge = replace(huge, "(4,)", "(1099511627776,)");
  huge.erase(huge.find('\n') - 12, 12);  // the header keeps its announced length
  write("huge.npy", huge);
  EXPECT_ERROR_CONTAINS(load_npy(path("huge.npy")),
                        "shape [1099511627776] of |u1 needs 1099511627776 bytes, the file holds 4");

  EXPECT_ERROR_CONTAINS(save_npy(path("no/such/dir/x.npy"), NDArray::empty({1}, kFloat32)),
                        "no/such/dir/x.npy");
  EXPECT_ERROR_CONTAINS(
      save_npy(path("vec.npy"), NDArray::empty({1}, KilnDType{kKilnFloat, 32, 4})), "vec.npy");
}

TEST_F(NpyTest, ReadsWhatNumpyWrites) {
  if (std::system("python3 -c 'import numpy' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "numpy is not importable";
  }
  const std::string script = path("gen.py");
  std::ofstream(script)
      << "import numpy as np, sys\n"
         "d = sys.argv[1]\n"
         "np.save(d + '/f4.npy', np.arange(6, dtype=np.float32).reshape(2, 3) / 4)\n"
         "np.save(d + '/f2.npy', np.array([1.5, -2, 65504], dtype=np.float16))\n"
         "np.save(d + '/i1.npy', np.array([-128, 0, 127], dtype=np.int8))\n"
         "np.save(d + '/i8.npy', np.array([[1 << 40]], dtype=np.int64))\n"
         "np.save(d + '/b1.npy', np.array([True, False, True]))\n"
         "np.save(d + '/fortran.npy', np.asfortranarray(np.ones((2, 3), np.float32)))\n"
         "a = np.load(d + '/kiln.npy')\n"
         "assert a.dtype == np.int32 and a.shape == (2, 2) and a.tolist() == [[1, 2], [3, 4]], a\n";
  save_npy(path("kiln.npy"), NDArray::from_vector<int32_t>({1, 2, 3, 4}, {2, 2}));
  ASSERT_EQ(std::system(("python3 " + script + " " + dir_.path().string()).c_str()), 0);

  NDArray f4 = load_npy(path("f4.npy"));
  EXPECT_EQ(f4.shape(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f4.to_vector<float>(), (std::vector<float>{0, 0.25f, 0.5f, 0.75f, 1, 1.25f}));
  NDArray f2 = load_npy(path("f2.npy"));
  EXPECT_TRUE(dtype_equal(f2.dtype(), kFloat16));
  EXPECT_EQ(f2.to_vector<uint16_t>(), (std::vector<uint16_t>{0x3e00, 0xc000, 0x7bff}));
  EXPECT_EQ(load_npy(path("i1.npy")).to_vector<int8_t>(), (std::vector<int8_t>{-128, 0, 127}));
  NDArray i8 = load_npy(path("i8.npy"));
  EXPECT_EQ(i8.shape(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(i8.to_vector<int64_t>(), std::vector<int64_t>{int64_t{1} << 40});
  NDArray b1 = load_npy(path("b1.npy"));
  EXPECT_TRUE(dtype_equal(b1.dtype(), kBool));
  EXPECT_EQ(b1.to_vector<uint8_t>(), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_ERROR_CONTAINS(load_npy(path("fortran.npy")), "Fortran");
}

}  // namespace
}  // namespace kiln::runtime
