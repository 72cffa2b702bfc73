// Reading and writing bundles.
#include "deploy/runtime/bundle.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "base/error.h"
#include "base/fnv1a.h"
#include "base/json.h"
#include "deploy/runtime/dtype.h"

namespace kiln::runtime {
namespace {

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'B', 'N', 'D', 'L'};
constexpr char kEnd[8] = {'K', 'I', 'L', 'N', 'E', 'N', 'D', '!'};
constexpr char kParamsMagic[4] = {'K', 'P', 'R', 'M'};
constexpr uint32_t kCpuVersion = 1;
constexpr uint32_t kDeviceVersion = 2;  ///< adds the device section
constexpr uint32_t kVdlaVersion = 3;    ///< adds the vdla section
enum SectionKind : uint32_t { kGraph = 1, kLibrary = 2, kParams = 3, kDevice = 4, kVdla = 5 };

class Writer {
 public:
  template <typename T>
  void put(T v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void bytes(const void* p, size_t n) { out.append(static_cast<const char*>(p), n); }
  std::string out;
};

/// Reads fields with bounds checks; every failure names the origin and what was being read.
class Reader {
 public:
  Reader(const char* data, size_t size, const std::string& origin)
      : p_(data), n_(size), origin_(origin) {}

  template <typename T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  const char* take(uint64_t n, const char* what) {
    need(n, what);
    const char* p = p_ + pos_;
    pos_ += n;
    return p;
  }
  size_t left() const { return n_ - pos_; }

 private:
  void need(uint64_t n, const char* what) {
    KILN_USER_CHECK(n <= n_ - pos_) << "bundle '" << origin_ << "' is truncated: reading " << what
                                    << " needs " << n << " bytes, " << (n_ - pos_) << " remain";
  }
  const char* p_;
  size_t n_;
  size_t pos_ = 0;
  const std::string& origin_;
};

std::string serialize_params(const std::map<std::string, NDArray>& params) {
  Writer w;
  // Reserved up front: a model's weights can be most of a gigabyte, and growing the string by
  // doubling copies them again and again.
  size_t size = 8;
  for (const auto& [name, a] : params)
    size += 28 + name.size() + 8 * a.shape().size() + static_cast<size_t>(a.nbytes());
  w.out.reserve(size);
  w.bytes(kParamsMagic, 4);
  w.put<uint32_t>(static_cast<uint32_t>(params.size()));
  for (const auto& [name, a] : params) {
    w.put<uint32_t>(static_cast<uint32_t>(name.size()));
    w.bytes(name.data(), name.size());
    w.put<uint8_t>(a.dtype().code);
    w.put<uint8_t>(a.dtype().bits);
    w.put<uint16_t>(a.dtype().lanes);
    w.put<uint32_t>(static_cast<uint32_t>(a.ndim()));
    for (int64_t d : a.shape()) w.put<int64_t>(d);
    w.put<uint64_t>(static_cast<uint64_t>(a.nbytes()));
    w.bytes(a.data(), static_cast<size_t>(a.nbytes()));
  }
  return w.out;
}

/// The params section's arrays; with `load` false, every field is checked but no array is made
/// (check_bundle_file: the bytes stay in the file).
std::map<std::string, NDArray> deserialize_params(const char* data, size_t size,
                                                  const std::string& origin, bool load) {
  Reader r(data, size, origin);
  KILN_USER_CHECK(std::memcmp(r.take(4, "the params header"), kParamsMagic, 4) == 0)
      << "bundle '" << origin << "': the params section has a bad header";
  uint32_t count = r.get<uint32_t>("the parameter count");
  std::map<std::string, NDArray> params;
  std::set<std::string> names;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t len = r.get<uint32_t>("a parameter name length");
    std::string name(r.take(len, "a parameter name"), len);
    KilnDType t{r.get<uint8_t>("a dtype"), r.get<uint8_t>("a dtype"), r.get<uint16_t>("a dtype")};
    uint32_t rank = r.get<uint32_t>("a rank");
    KILN_USER_CHECK(rank <= 32) << "bundle '" << origin << "': parameter '" << name << "' has rank "
                                << rank;
    std::vector<int64_t> shape(rank);
    for (auto& d : shape) d = r.get<int64_t>("a dimension");
    uint64_t nbytes = r.get<uint64_t>("a byte count");
    // The shape's size is checked against the byte count, and taken from the file, before the
    // array is allocated: a damaged shape must not ask for terabytes.
    const int64_t want = NDArray::nbytes_for(shape, t);
    if (static_cast<uint64_t>(want) != nbytes) {
      std::ostringstream dims;
      for (size_t d = 0; d < shape.size(); ++d) dims << (d ? ", " : "") << shape[d];
      KILN_USER_ERROR() << "bundle '" << origin << "': parameter '" << name << "' of shape ["
                        << dims.str() << "] and dtype " << dtype_to_string(t) << " holds " << want
                        << " bytes, the file says " << nbytes;
    }
    const char* bytes = r.take(nbytes, "parameter data");
    KILN_USER_CHECK(names.insert(name).second)
        << "bundle '" << origin << "': parameter '" << name << "' appears twice";
    if (!load) continue;
    NDArray a = NDArray::empty(shape, t);
    a.copy_from_bytes(bytes, nbytes);
    params.emplace(name, std::move(a));
  }
  KILN_USER_CHECK(r.left() == 0) << "bundle '" << origin << "': " << r.left()
                                 << " stray bytes after the params";
  return params;
}

std::string serialize_device_programs(const std::vector<DeviceProgram>& programs) {
  Json::Array list;
  for (const DeviceProgram& p : programs) list.push_back(p.to_json());
  return Json(Json::Object{{"programs", Json(std::move(list))}}).dump();
}

/// The device section's programs, each checked by DeviceProgram::from_json, then as a set: at
/// least one, names distinct, one format.
std::vector<DeviceProgram> deserialize_device_programs(const char* data, size_t size,
                                                       const std::string& origin) {
  const std::string where = "bundle '" + origin + "': device section";
  const Json j = Json::parse(std::string(data, size), where);
  std::vector<DeviceProgram> programs;
  std::set<std::string> names;
  for (const Json& p : j.at("programs", where).as_array(where + ": programs")) {
    programs.push_back(DeviceProgram::from_json(p, "bundle '" + origin + "'"));
    const DeviceProgram& added = programs.back();
    KILN_USER_CHECK(names.insert(added.name).second)
        << where << ": device program '" << added.name << "' appears twice";
    KILN_USER_CHECK(added.format == programs.front().format)
        << where << ": device program '" << added.name << "' holds " << added.format
        << " code, but '" << programs.front().name << "' holds " << programs.front().format
        << " (a bundle is for one kind of device)";
  }
  KILN_USER_CHECK(!programs.empty()) << where << " holds no programs";
  return programs;
}

std::string serialize_vdla_programs(const std::vector<vdla::VdlaProgram>& programs) {
  Json::Array list;
  for (const vdla::VdlaProgram& p : programs) list.push_back(p.to_json());
  return Json(Json::Object{{"config", Json(vdla::Config{}.describe())},
                           {"programs", Json(std::move(list))}})
      .dump();
}

/// The vdla section: built for this runtime's VDLA configuration, at least one program, each
/// checked by VdlaProgram::from_json, names distinct.
std::vector<vdla::VdlaProgram> deserialize_vdla_programs(const char* data, size_t size,
                                                         const std::string& origin) {
  const std::string where = "bundle '" + origin + "': vdla section";
  const Json j = Json::parse(std::string(data, size), where);
  const std::string config = j.at("config", where).as_string(where + ": config");
  KILN_USER_CHECK(config == vdla::Config{}.describe())
      << where << ": its programs were built for a VDLA of " << config << ", this runtime's is "
      << vdla::Config{}.describe();
  std::vector<vdla::VdlaProgram> programs;
  std::set<std::string> names;
  const auto& list = j.at("programs", where).as_array(where + ": programs");
  for (size_t i = 0; i < list.size(); ++i) {
    programs.push_back(
        vdla::VdlaProgram::from_json(list[i], where + ": program " + std::to_string(i)));
    KILN_USER_CHECK(names.insert(programs.back().name).second)
        << where << ": vdla program '" << programs.back().name << "' appears twice";
  }
  KILN_USER_CHECK(!programs.empty()) << where << " holds no programs";
  return programs;
}

}  // namespace

TargetKind bundle_device(const Bundle& b) {
  if (b.device_programs.empty()) {
    return b.vdla_programs.empty() ? TargetKind::kCpu : TargetKind::kVdla;
  }
  return b.device_programs.front().format == "ptx" ? TargetKind::kCuda : TargetKind::kOpenCL;
}

std::string serialize_bundle(const Bundle& b) {
  const bool on_device = !b.device_programs.empty();
  const bool vdla = !b.vdla_programs.empty();
  KILN_USER_CHECK(!on_device || b.library.empty())
      << "a bundle holds device programs or a host library, not both";
  KILN_USER_CHECK(!on_device || !vdla)
      << "a bundle holds GPU device programs or VDLA programs, not both";
  const std::string params = serialize_params(b.params);
  const std::string device = on_device ? serialize_device_programs(b.device_programs) : "";
  const std::string vdla_programs = vdla ? serialize_vdla_programs(b.vdla_programs) : "";
  Writer w;
  w.out.reserve(16 + 5 * 16 + b.graph_json.size() + b.library.size() + params.size() +
                device.size() + vdla_programs.size() + 16);
  w.bytes(kMagic, 8);
  w.put<uint32_t>(on_device ? kDeviceVersion : vdla ? kVdlaVersion : kCpuVersion);
  w.put<uint32_t>(on_device || vdla ? 4 : 3);
  auto section = [&](uint32_t kind, const std::string& body) {
    w.put<uint32_t>(kind);
    w.put<uint32_t>(0);
    w.put<uint64_t>(body.size());
    w.bytes(body.data(), body.size());
  };
  section(kGraph, b.graph_json);
  section(kLibrary, b.library);
  section(kParams, params);
  if (on_device) section(kDevice, device);
  if (vdla) section(kVdla, vdla_programs);
  w.put<uint64_t>(fnv1a64(w.out.data(), w.out.size()));
  w.bytes(kEnd, 8);
  return w.out;
}

namespace {

/// deserialize_bundle, with the params loaded or only checked.
Bundle parse_bundle(std::string_view bytes, const std::string& origin, bool load_params) {
  KILN_USER_CHECK(bytes.size() >= 8 && std::memcmp(bytes.data(), kMagic, 8) == 0)
      << "'" << origin << "' is not a Kiln bundle (it does not start with KILNBNDL)";
  KILN_USER_CHECK(bytes.size() >= 8 + 8 + 16 &&
                  std::memcmp(bytes.data() + bytes.size() - 8, kEnd, 8) == 0)
      << "bundle '" << origin << "' is truncated (its end marker is missing)";
  const size_t body = bytes.size() - 16;
  uint64_t stored;
  std::memcpy(&stored, bytes.data() + body, 8);
  KILN_USER_CHECK(stored == fnv1a64(bytes.data(), body))
      << "bundle '" << origin << "' is corrupted: its checksum does not match its contents";
  Reader r(bytes.data(), body, origin);
  r.take(8, "the magic");
  uint32_t version = r.get<uint32_t>("the version");
  KILN_USER_CHECK(version == kCpuVersion || version == kDeviceVersion || version == kVdlaVersion)
      << "bundle '" << origin << "' has format version " << version
      << "; this runtime reads versions " << kCpuVersion << ", " << kDeviceVersion << " and "
      << kVdlaVersion;
  // The one section a version adds beyond graph, library and params.
  const uint32_t extra_kind = version == kDeviceVersion ? uint32_t{kDevice}
                              : version == kVdlaVersion ? uint32_t{kVdla}
                                                        : uint32_t{0};
  uint32_t sections = r.get<uint32_t>("the section count");
  Bundle b;
  bool seen[6] = {false, false, false, false, false, false};
  for (uint32_t i = 0; i < sections; ++i) {
    uint32_t kind = r.get<uint32_t>("a section kind");
    r.get<uint32_t>("a section header");
    uint64_t size = r.get<uint64_t>("a section size");
    const char* data = r.take(size, "a section");
    KILN_USER_CHECK(
        ((kind >= kGraph && kind <= kParams) || (extra_kind != 0 && kind == extra_kind)) &&
        !seen[kind])
        << "bundle '" << origin << "': unknown or repeated section kind " << kind
        << " (format version " << version << ")";
    seen[kind] = true;
    if (kind == kGraph) b.graph_json.assign(data, size);
    if (kind == kLibrary) b.library.assign(data, size);
    if (kind == kParams) b.params = deserialize_params(data, size, origin, load_params);
    if (kind == kDevice) b.device_programs = deserialize_device_programs(data, size, origin);
    if (kind == kVdla) b.vdla_programs = deserialize_vdla_programs(data, size, origin);
  }
  KILN_USER_CHECK(seen[kGraph] && seen[kLibrary] && seen[kParams])
      << "bundle '" << origin << "' lacks a section (graph, library and params are all required)";
  if (version == kDeviceVersion) {
    KILN_USER_CHECK(seen[kDevice])
        << "bundle '" << origin << "' has format version 2 but no device section";
    KILN_USER_CHECK(b.library.empty())
        << "bundle '" << origin << "' holds device programs and a host library of "
        << b.library.size() << " bytes; a GPU bundle's nodes all run on the device";
  }
  KILN_USER_CHECK(version != kVdlaVersion || seen[kVdla])
      << "bundle '" << origin << "' has format version 3 but no vdla section";
  return b;
}

}  // namespace

Bundle deserialize_bundle(std::string_view bytes, const std::string& origin) {
  return parse_bundle(bytes, origin, /*load_params=*/true);
}

void write_bundle(const std::string& path, const Bundle& b) {
  std::string bytes = serialize_bundle(b);
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  KILN_USER_CHECK(f.good()) << "cannot write bundle '" << path << "'";
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  f.close();
  KILN_USER_CHECK(f.good()) << "writing bundle '" << path << "' failed";
}

Bundle read_bundle(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  KILN_USER_CHECK(f.good()) << "cannot open bundle '" << path << "'";
  std::string bytes(static_cast<size_t>(f.tellg()), '\0');  // read once, in place
  f.seekg(0);
  f.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  KILN_USER_CHECK(f.good()) << "reading bundle '" << path << "' failed";
  return deserialize_bundle(bytes, path);
}

void check_bundle_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  KILN_USER_CHECK(fd >= 0) << "cannot open bundle '" << path << "'";
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size == 0) {
    ::close(fd);
    KILN_USER_ERROR() << "bundle '" << path << "' is empty or cannot be read";
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  KILN_SYSTEM_CHECK(map != MAP_FAILED) << "cannot map bundle '" << path << "'";
  ::madvise(map, size, MADV_SEQUENTIAL);
  struct Unmap {
    void* p;
    size_t n;
    ~Unmap() { ::munmap(p, n); }
  } unmap{map, size};
  parse_bundle(std::string_view(static_cast<const char*>(map), size), path,
               /*load_params=*/false);
}

}  // namespace kiln::runtime
