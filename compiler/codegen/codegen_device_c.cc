// The device C printer shared by CUDA and OpenCL (codegen_device_c.h). It prints each kernel as a
// C function; expressions become C expressions with the fewest parentheses C's precedence
// allows. Where C has no expression for an IR construct (a Let, a contiguous vector load), the
// printer declares a temporary just before the statement that uses it: the IR's expressions are
// pure, so computing them earlier changes nothing.
#include "compiler/codegen/codegen_device_c.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "base/error.h"
#include "compiler/ir/analysis.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/interval.h"
#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"

namespace kiln::codegen {
namespace {

using ir::DataType;
using ir::Expr;
using ir::ExprKind;
using ir::Stmt;
using ir::StmtKind;

// C operator precedence; larger binds tighter.
enum Prec {
  kPrecTernary = 3,
  kPrecOr = 4,
  kPrecAnd = 5,
  kPrecBitAnd = 8,
  kPrecEq = 9,
  kPrecRel = 10,
  kPrecShift = 11,  // also negative literals, so that `a - (-1)` keeps its parentheses
  kPrecAdd = 12,
  kPrecMul = 13,
  kPrecUnary = 15,
  kPrecAtom = 16,
};

/// A printed C expression and the precedence of its outermost operator.
struct CExpr {
  std::string text;
  int prec = kPrecAtom;
};

std::string wrap(const CExpr& e, int need) { return e.prec < need ? "(" + e.text + ")" : e.text; }

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

/// Names a variable must not take: keywords and types of C, CUDA C++ and OpenCL C, their
/// built-in variables, and the functions the printed code calls.
bool is_reserved(const std::string& s) {
  static const std::set<std::string> kWords = {
      "auto",      "bool",       "break",    "case",     "char",     "class",     "const",
      "constant",  "continue",   "default",  "delete",   "do",       "double",    "else",
      "enum",      "extern",     "false",    "float",    "for",      "friend",    "global",
      "goto",      "half",       "if",       "inline",   "int",      "kernel",    "local",
      "long",      "namespace",  "new",      "operator", "private",  "protected", "public",
      "read_only", "read_write", "register", "restrict", "return",   "short",     "signed",
      "sizeof",    "static",     "struct",   "switch",   "template", "this",      "true",
      "typedef",   "typename",   "uchar",    "uint",     "ulong",    "union",     "unsigned",
      "ushort",    "using",      "virtual",  "void",     "volatile", "while",     "write_only",
      "threadIdx", "blockIdx",   "blockDim", "gridDim",  "warpSize", "assert",    "barrier",
      "printf",    "min",        "max",      "fmin",     "fmax",     "fminf",     "fmaxf",
      "abs",       "select",     "clamp",    "mix",      "sign",     "step",      "dot",
      "INFINITY",  "NAN"};
  if (kWords.count(s)) return true;
  static const char* kPrefixes[] = {"__",       "kiln_", "make_", "vload", "vstore",
                                    "convert_", "get_",  "as_",   "atomic"};
  for (const char* p : kPrefixes) {
    if (s.rfind(p, 0) == 0) return true;
  }
  // Math functions (exp, expf, ...) and vector types (float4, int16, ...).
  static const std::set<std::string> kMath = {
      "exp",   "exp2",  "log",   "log2",  "log10", "sqrt", "rsqrt", "fabs", "floor", "ceil",
      "trunc", "round", "rint",  "sin",   "cos",   "tan",  "asin",  "acos", "atan",  "sinh",
      "cosh",  "tanh",  "asinh", "acosh", "atanh", "erf",  "pow",   "fma",  "fmod"};
  if (kMath.count(s) || (s.back() == 'f' && kMath.count(s.substr(0, s.size() - 1)))) return true;
  static const char* kTypes[] = {"char", "uchar",    "short",    "ushort", "int",
                                 "uint", "long",     "ulong",    "float",  "double",
                                 "half", "longlong", "ulonglong"};
  for (const char* t : kTypes) {
    const std::string p = t;
    if (s.size() > p.size() && s.compare(0, p.size(), p) == 0 &&
        std::all_of(s.begin() + static_cast<std::ptrdiff_t>(p.size()), s.end(),
                    [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
      return true;
    }
  }
  return false;
}

/// Shortest decimal text of v that reads back as the same value of `bits` (32 or 64).
std::string float_text(double v, int bits) {
  char buf[64];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    const double back = std::strtod(buf, nullptr);
    if (bits == 64 ? back == v : static_cast<float>(back) == static_cast<float>(v)) break;
  }
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

constexpr const char* kThreadTags[] = {"blockIdx.x",  "blockIdx.y",  "blockIdx.z",
                                       "threadIdx.x", "threadIdx.y", "threadIdx.z"};

/// The shared allocations of a kernel, in the order they appear.
class SharedAllocations : public ir::IRVisitor {
 public:
  std::vector<const ir::AllocateNode*> found;
  void visit_(const ir::AllocateNode* op) override {
    if (op->scope == "shared") found.push_back(op);
    ir::IRVisitor::visit_(op);
  }
};

/// What the printer needs to know about a buffer variable.
struct BufferInfo {
  DataType elem;
  std::string scope;  ///< "global", "shared" or "local"
};

/// Prints one kernel. Collects, across kernels, what the preamble must provide.
class KernelPrinter {
 public:
  KernelPrinter(const DeviceDialect& dialect, std::set<std::string>* helpers, bool* uses_half,
                bool* uses_double)
      : d_(dialect), helpers_(helpers), uses_half_(uses_half), uses_double_(uses_double) {}

  std::string print(const ir::PrimFunc& f) {
    name_ = f.name;
    KILN_USER_CHECK(is_identifier(f.name))
        << "device codegen: kernel name '" << f.name << "' is not a C identifier Kiln can use";
    scan(f);
    std::vector<std::string> params;
    for (const ir::Param& p : f.params) {
      const std::string name = define(p.var.get(), p.var.name());
      if (p.is_tensor()) {
        const DataType elem = p.buffer->dtype.element_of();
        note_type(elem);
        buffers_[p.var.get()] = {elem, "global"};
        params.push_back(d_.pointer_param(memory_type(elem), name, !written_.count(p.var.get())));
      } else {
        KILN_USER_CHECK(!p.var.dtype().is_handle() && p.var.dtype().is_scalar())
            << "device codegen: kernel '" << name_ << "' has a scalar parameter '" << p.var.name()
            << "' of type " << p.var.dtype().str() << "; kernels take tensors and scalar numbers";
        note_type(p.var.dtype());
        // OpenCL kernels take no bool arguments: a bool is passed as a byte, as in memory.
        params.push_back(memory_type(p.var.dtype()) + " " + name);
      }
    }
    std::ostringstream head;
    head << d_.kernel_prefix(threads_per_block()) << " " << f.name << "(";
    for (size_t i = 0; i < params.size(); ++i) head << (i ? ", " : "") << params[i];
    head << ") {\n";
    indent_ = 1;
    scopes_.emplace_back();
    for (const ir::AllocateNode* a : shared_) {
      const std::string name = define(a->buffer_var.get(), a->buffer_var.name());
      buffers_[a->buffer_var.get()] = {a->dtype.element_of(), "shared"};
      line(d_.shared_array(memory_type(a->dtype.element_of()), name, elements(a)));
    }
    stmt(f.body);
    return head.str() + out_.str() + "}\n";
  }

 private:
  // ---- before printing ----

  /// Finds thread extents, shared allocations, written buffers (stored to, or handed to a call:
  /// the others are const), the variables in use (an unused thread index is not declared) and
  /// the types in use.
  void scan(const ir::PrimFunc& f) {
    std::unordered_map<const ir::VarNode*, const ir::VarNode*> alias_of;
    ir::post_order_visit(f.body, [&](const ir::Object* n) {
      if (auto* e = dynamic_cast<const ir::ExprNode*>(n)) {
        note_type(e->dtype);
        if (e->kind == ExprKind::kVar) used_.insert(static_cast<const ir::VarNode*>(e));
        if (e->kind == ExprKind::kLoad) {
          auto* load = static_cast<const ir::LoadNode*>(e);
          KILN_USER_CHECK(!load->index.dtype().is_vector() ||
                          load->index.dtype().lanes() == load->dtype.lanes())
              << "device codegen: kernel '" << name_ << "' loads " << load->dtype.str()
              << " with an index of " << load->index.dtype().str();
        }
        if (e->kind == ExprKind::kCall) {
          // A buffer handed to a call may be written by it.
          auto* call = static_cast<const ir::CallNode*>(e);
          if (call->call_kind != ir::CallKind::kPureIntrinsic) {
            for (const Expr& arg : call->args) {
              if (auto* v = arg.as<ir::VarNode>()) written_.insert(v);
            }
          }
        }
        return;
      }
      auto* s = dynamic_cast<const ir::StmtNode*>(n);
      if (s == nullptr) return;
      if (s->kind == StmtKind::kLetStmt) {
        auto* let = static_cast<const ir::LetStmtNode*>(s);
        if (auto* src = let->value.as<ir::VarNode>()) alias_of[let->var.get()] = src;
      } else if (s->kind == StmtKind::kStore) {
        written_.insert(static_cast<const ir::StoreNode*>(s)->buffer_var.get());
      } else if (s->kind == StmtKind::kAllocate) {
        auto* a = static_cast<const ir::AllocateNode*>(s);
        note_type(a->dtype);
      } else if (s->kind == StmtKind::kAttrStmt) {
        auto* a = static_cast<const ir::AttrStmtNode*>(s);
        if (a->key != ir::attr::kThreadExtent) return;
        auto* iv = dynamic_cast<const ir::IterVarNode*>(a->node.get());
        KILN_USER_CHECK(iv != nullptr && std::count(std::begin(kThreadTags), std::end(kThreadTags),
                                                    iv->thread_tag) == 1)
            << "device codegen: kernel '" << name_
            << "' has a thread_extent whose node is not an IterVar tagged blockIdx.x/y/z or "
               "threadIdx.x/y/z";
        auto c = ir::as_const_int(a->value);
        auto [it, fresh] = extents_.emplace(iv->thread_tag, c.value_or(-1));
        KILN_USER_CHECK(fresh || it->second == c.value_or(-1))
            << "device codegen: kernel '" << name_ << "' binds " << iv->thread_tag
            << " with two different extents";
      }
    });
    // Writing through another name of a buffer writes the buffer.
    for (const ir::VarNode* w : std::vector<const ir::VarNode*>(written_.begin(), written_.end())) {
      for (auto it = alias_of.find(w); it != alias_of.end(); it = alias_of.find(it->second)) {
        if (!written_.insert(it->second).second) break;
      }
    }
    SharedAllocations shared;
    shared.visit(f.body);
    shared_ = std::move(shared.found);
  }

  int64_t threads_per_block() const {
    int64_t n = 1;
    for (const char* tag : {"threadIdx.x", "threadIdx.y", "threadIdx.z"}) {
      auto it = extents_.find(tag);
      if (it == extents_.end()) continue;
      if (it->second < 0) return 0;
      n *= it->second;
    }
    return n;
  }

  void note_type(DataType t) {
    if (t.is_float() && t.bits() == 16) *uses_half_ = true;
    if (t.is_float() && t.bits() == 64) *uses_double_ = true;
  }

  int64_t elements(const ir::AllocateNode* a) {
    int64_t n = a->dtype.lanes();
    for (const Expr& e : a->extents) {
      auto c = ir::as_const_int(e);
      KILN_USER_CHECK(c.has_value() && *c > 0)
          << "device codegen: kernel '" << name_ << "' allocates '" << a->buffer_var.name()
          << "' in " << a->scope << " memory with extent " << ir::to_string(e)
          << "; device arrays need constant sizes";
      n *= *c;
    }
    return n;
  }

  // ---- names ----

  /// Gives variable v a C name made from `hint` that no variable in scope has.
  std::string define(const ir::VarNode* v, const std::string& hint) {
    std::string base;
    for (char c : hint) base += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    if (base.empty() || std::isdigit(static_cast<unsigned char>(base[0]))) base = "v_" + base;
    if (is_reserved(base)) base += "_";
    std::string name = base;
    for (int i = 1; taken_.count(name); ++i) name = base + "_" + std::to_string(i);
    taken_.insert(name);
    names_[v] = name;
    if (!scopes_.empty()) {
      scopes_.back().vars.insert(v);
      scopes_.back().names.push_back(name);
    }
    return name;
  }

  const std::string& name_of(const ir::VarNode* v) {
    auto it = names_.find(v);
    KILN_USER_CHECK(it != names_.end())
        << "device codegen: kernel '" << name_ << "' uses variable '" << v->name
        << "', which is neither a parameter nor defined inside it";
    return it->second;
  }

  bool in_scope(const ir::VarNode* v) const {
    return std::any_of(scopes_.begin(), scopes_.end(),
                       [&](auto& s) { return s.vars.count(v) > 0; });
  }

  const BufferInfo& buffer(const ir::VarNode* v) {
    auto it = buffers_.find(v);
    KILN_USER_CHECK(it != buffers_.end())
        << "device codegen: kernel '" << name_ << "' accesses '" << v->name
        << "', which is neither a tensor parameter nor allocated inside it";
    return it->second;
  }

  // ---- types and literals ----

  /// Bool elements live in memory as bytes.
  std::string memory_type(DataType elem) const {
    return d_.type_name(elem.is_bool() ? DataType::Int(8) : elem);
  }

  CExpr literal(const Expr& e) {
    const DataType t = e.dtype();
    if (auto* f = e.as<ir::FloatImmNode>()) {
      const double v = f->value;
      const DataType calc = t.bits() == 16 ? ir::kFloat32 : t;
      CExpr r;
      if (std::isnan(v)) {
        r = {d_.nan(calc), kPrecAtom};
      } else if (std::isinf(v)) {
        r = v > 0 ? CExpr{d_.infinity(calc), kPrecAtom}
                  : CExpr{"-" + d_.infinity(calc), kPrecShift};
      } else {
        r = {float_text(v, calc.bits()) + (calc.bits() == 32 ? "f" : ""),
             v < 0 ? kPrecShift : kPrecAtom};
      }
      if (t.bits() == 16) return {"(" + d_.type_name(t) + ")" + wrap(r, kPrecUnary), kPrecUnary};
      return r;
    }
    const int64_t v = e.as<ir::IntImmNode>()->value;
    if (t.is_bool()) return {v ? "true" : "false", kPrecAtom};
    const int prec = v < 0 ? kPrecShift : kPrecAtom;
    if (t.is_int() && t.bits() == 32) {
      if (v == INT32_MIN) return {"(-2147483647 - 1)", kPrecAtom};
      return {std::to_string(v), prec};
    }
    if (t.is_int() && t.bits() == 64) {
      const std::string s = d_.int64_suffix();
      if (v == INT64_MIN) return {"(-9223372036854775807" + s + " - 1" + s + ")", kPrecAtom};
      return {std::to_string(v) + s, prec};
    }
    if (t.is_uint() && t.bits() == 32)
      return {std::to_string(static_cast<uint32_t>(v)) + "u", kPrecAtom};
    if (t.is_uint() && t.bits() == 64) {
      return {std::to_string(static_cast<uint64_t>(v)) + "u" + d_.int64_suffix(), kPrecAtom};
    }
    return {
        "(" + d_.type_name(t) + ")" + (v < 0 ? "(" + std::to_string(v) + ")" : std::to_string(v)),
        kPrecUnary};
  }

  // ---- expressions ----

  /// Lane `lane` of e, or all of a scalar e when lane is -1.
  CExpr expr(const Expr& e, int lane = -1) {
    KILN_USER_CHECK(e.dtype().is_scalar() || lane >= 0)
        << "device codegen: kernel '" << name_ << "': a vector value " << ir::to_string(e)
        << " where a scalar is needed";
    if (e.dtype().is_scalar()) lane = -1;
    switch (e.kind()) {
      case ExprKind::kIntImm:
      case ExprKind::kFloatImm:
        return literal(e);
      case ExprKind::kStringImm:
        KILN_USER_ERROR() << "device codegen: kernel '" << name_ << "': a string "
                          << ir::to_string(e) << " outside a barrier";
      case ExprKind::kVar: {
        const std::string& n = name_of(e.as<ir::VarNode>());
        if (lane < 0) return {n, kPrecAtom};
        return {n + "[" + std::to_string(lane) + "]", kPrecAtom};
      }
      case ExprKind::kCast:
        return cast(e.dtype().element_of(), e.as<ir::CastNode>()->value, lane);
      case ExprKind::kAdd:
        return binary<ir::AddNode>(e, "+", kPrecAdd, lane);
      case ExprKind::kSub:
        return binary<ir::SubNode>(e, "-", kPrecAdd, lane);
      case ExprKind::kMul:
        return binary<ir::MulNode>(e, "*", kPrecMul, lane);
      case ExprKind::kDiv:
        return binary<ir::DivNode>(e, "/", kPrecMul, lane);
      case ExprKind::kMod: {
        auto* op = e.as<ir::ModNode>();
        if (e.dtype().is_float())
          return math_call("fmod", e.dtype().element_of(), {op->a, op->b}, lane);
        return binary<ir::ModNode>(e, "%", kPrecMul, lane);
      }
      case ExprKind::kFloorDiv: {
        auto* op = e.as<ir::FloorDivNode>();
        return floor_div_mod(true, e.dtype().element_of(), op->a, op->b, lane);
      }
      case ExprKind::kFloorMod: {
        auto* op = e.as<ir::FloorModNode>();
        return floor_div_mod(false, e.dtype().element_of(), op->a, op->b, lane);
      }
      case ExprKind::kShr:
        return binary<ir::ShrNode>(e, ">>", kPrecShift, lane);
      case ExprKind::kMin: {
        auto* op = e.as<ir::MinNode>();
        return min_max(true, e.dtype().element_of(), op->a, op->b, lane);
      }
      case ExprKind::kMax: {
        auto* op = e.as<ir::MaxNode>();
        return min_max(false, e.dtype().element_of(), op->a, op->b, lane);
      }
      case ExprKind::kEQ:
        return binary<ir::EQNode>(e, "==", kPrecEq, lane);
      case ExprKind::kNE:
        return binary<ir::NENode>(e, "!=", kPrecEq, lane);
      case ExprKind::kLT:
        return binary<ir::LTNode>(e, "<", kPrecRel, lane);
      case ExprKind::kLE:
        return binary<ir::LENode>(e, "<=", kPrecRel, lane);
      case ExprKind::kGT:
        return binary<ir::GTNode>(e, ">", kPrecRel, lane);
      case ExprKind::kGE:
        return binary<ir::GENode>(e, ">=", kPrecRel, lane);
      case ExprKind::kAnd:
        return binary<ir::AndNode>(e, "&&", kPrecAnd, lane);
      case ExprKind::kOr: {
        // `a && b || c` is legal C, but compilers warn; && inside || gets parentheses.
        auto* op = e.as<ir::OrNode>();
        return {
            wrap(expr(op->a, lane), kPrecAnd + 1) + " || " + wrap(expr(op->b, lane), kPrecAnd + 1),
            kPrecOr};
      }
      case ExprKind::kNot:
        return {"!" + wrap(expr(e.as<ir::NotNode>()->a, lane), kPrecUnary), kPrecUnary};
      case ExprKind::kSelect: {
        auto* op = e.as<ir::SelectNode>();
        return {wrap(expr(op->condition, lane), kPrecTernary + 1) + " ? " +
                    expr(op->true_value, lane).text + " : " +
                    wrap(expr(op->false_value, lane), kPrecTernary),
                kPrecTernary};
      }
      case ExprKind::kLoad:
        return load(e.as<ir::LoadNode>(), lane);
      case ExprKind::kRamp: {
        auto* op = e.as<ir::RampNode>();
        KILN_USER_CHECK(lane >= 0) << "device codegen: kernel '" << name_ << "': a ramp "
                                   << ir::to_string(e) << " where a scalar is needed";
        return expr(ramp_lane(op, lane));
      }
      case ExprKind::kBroadcast:
        return expr(e.as<ir::BroadcastNode>()->value);
      case ExprKind::kLet: {
        auto* op = e.as<ir::LetNode>();
        const std::string name = hoist_let(op);
        const ir::VarNode* v = op->var.get();
        auto saved = names_.find(v) == names_.end() ? std::string() : names_[v];
        names_[v] = name;
        CExpr body = expr(op->body, lane);
        if (saved.empty())
          names_.erase(v);
        else
          names_[v] = saved;
        return body;
      }
      case ExprKind::kCall:
        return call(e.as<ir::CallNode>(), lane);
      case ExprKind::kProducerLoad:
      case ExprKind::kReduce:
        KILN_USER_ERROR() << "device codegen: kernel '" << name_ << "' still contains "
                          << ir::to_string(e) << "; lower the schedule before code generation";
    }
    KILN_UNREACHABLE();
  }

  /// base + lane * stride, with a constant step folded into base's constant term.
  static Expr ramp_lane(const ir::RampNode* op, int lane) {
    const DataType t = op->base.dtype();
    auto stride = ir::as_const_int(op->stride);
    if (!stride) return op->base + ir::make_const(t, int64_t{lane}) * op->stride;
    Expr rest = op->base;
    int64_t offset = *stride * lane;
    if (auto* add = rest.as<ir::AddNode>(); add != nullptr && ir::as_const_int(add->b)) {
      offset += *ir::as_const_int(add->b);
      rest = add->a;
    }
    if (auto c = ir::as_const_int(rest)) return ir::make_const(t, *c + offset);
    if (offset < 0) return rest - ir::make_const(t, -offset);
    return rest + ir::make_const(t, offset);
  }

  template <typename N>
  CExpr binary(const Expr& e, const char* op, int prec, int lane) {
    auto* n = e.as<N>();
    return {wrap(expr(n->a, lane), prec) + " " + op + " " + wrap(expr(n->b, lane), prec + 1), prec};
  }

  CExpr cast(DataType to, const Expr& value, int lane) {
    CExpr v = expr(value, lane);
    if (value.dtype().element_of() == to) return v;
    return {"(" + d_.type_name(to) + ")" + wrap(v, kPrecUnary), kPrecUnary};
  }

  CExpr floor_div_mod(bool div, DataType t, const Expr& a, const Expr& b, int lane) {
    if (t.is_float()) {
      CExpr q{math_function("floor", t) + "(" + wrap(expr(a, lane), kPrecMul) + " / " +
                  wrap(expr(b, lane), kPrecMul + 1) + ")",
              kPrecAtom};
      if (div) return q;
      return {wrap(expr(a, lane), kPrecAdd) + " - " + q.text + " * " +
                  wrap(expr(b, lane), kPrecMul + 1),
              kPrecAdd};
    }
    CExpr ca = expr(a, lane), cb = expr(b, lane);
    const char* op = div ? " / " : " % ";
    if (t.is_uint() || t.is_bool())
      return {wrap(ca, kPrecMul) + op + wrap(cb, kPrecMul + 1), kPrecMul};
    // Lanes of a and b range as the scalars do; vector bounds cover every lane.
    auto a_min = ir::const_min(a, dom_);
    auto b_min = ir::const_min(b, dom_);
    if (a_min && *a_min >= 0 && b_min && *b_min > 0) {
      return {wrap(ca, kPrecMul) + op + wrap(cb, kPrecMul + 1), kPrecMul};
    }
    auto c = ir::as_const_int(b);
    if (c && *c > 0 && (*c & (*c - 1)) == 0) {
      // Two's complement shift and mask round toward minus infinity.
      const int shift = 63 - __builtin_clzll(static_cast<uint64_t>(*c));
      if (div) return {wrap(ca, kPrecShift) + " >> " + std::to_string(shift), kPrecShift};
      return {wrap(ca, kPrecBitAnd + 1) + " & " + literal(ir::make_const(t, *c - 1)).text,
              kPrecBitAnd};
    }
    const std::string helper =
        std::string(div ? "kiln_floordiv" : "kiln_floormod") + (t.bits() == 64 ? "_i64" : "_i32");
    helpers_->insert(helper);
    return {helper + "(" + ca.text + ", " + cb.text + ")", kPrecAtom};
  }

  CExpr min_max(bool is_min, DataType t, const Expr& a, const Expr& b, int lane) {
    if (t.is_bool()) {
      return {wrap(expr(a, lane), kPrecAnd + 1) + (is_min ? " && " : " || ") +
                  wrap(expr(b, lane), kPrecAnd + 1),
              is_min ? kPrecAnd : kPrecOr};
    }
    if (t.is_float() && t.bits() == 16) {
      return {"(" + d_.type_name(t) + ")" + d_.min_max_function(is_min, ir::kFloat32) + "((float)" +
                  wrap(expr(a, lane), kPrecUnary) + ", (float)" + wrap(expr(b, lane), kPrecUnary) +
                  ")",
              kPrecUnary};
    }
    return {
        d_.min_max_function(is_min, t) + "(" + expr(a, lane).text + ", " + expr(b, lane).text + ")",
        kPrecAtom};
  }

  std::string math_function(const std::string& name, DataType t) {
    const std::string f = d_.math_function(name, t);
    KILN_USER_CHECK(!f.empty()) << "device codegen: kernel '" << name_ << "': no " << name
                                << " for " << t.str();
    return f;
  }

  /// A math intrinsic on float32 / float64; float16 computes in float32.
  CExpr math_call(const std::string& name, DataType t, const std::vector<Expr>& args, int lane) {
    KILN_USER_CHECK(t.is_float()) << "device codegen: kernel '" << name_ << "': intrinsic '" << name
                                  << "' needs a float type, got " << t.str();
    const bool half = t.bits() == 16;
    const DataType calc = half ? ir::kFloat32 : t;
    std::vector<CExpr> printed;
    for (const Expr& a : args) {
      CExpr c = expr(a, lane);
      printed.push_back(half ? CExpr{"(float)" + wrap(c, kPrecUnary), kPrecUnary} : c);
    }
    CExpr r;
    if (name == "sigmoid") {
      const std::string one = literal(ir::make_one(calc)).text;
      r = {one + " / (" + one + " + " + math_function("exp", calc) + "(-" +
               wrap(printed[0], kPrecUnary) + "))",
           kPrecMul};
    } else {
      std::string s = math_function(name, calc) + "(";
      for (size_t i = 0; i < printed.size(); ++i) s += (i ? ", " : "") + printed[i].text;
      r = {s + ")", kPrecAtom};
    }
    if (half) return {"(" + d_.type_name(t) + ")" + wrap(r, kPrecUnary), kPrecUnary};
    return r;
  }

  CExpr call(const ir::CallNode* op, int lane) {
    switch (op->call_kind) {
      case ir::CallKind::kPureIntrinsic: {
        static const std::map<std::string, size_t> kArity = {
            {"exp", 1},  {"exp2", 1},    {"log", 1},   {"log2", 1},  {"log10", 1}, {"sqrt", 1},
            {"fabs", 1}, {"floor", 1},   {"ceil", 1},  {"trunc", 1}, {"round", 1}, {"roundeven", 1},
            {"sin", 1},  {"cos", 1},     {"tan", 1},   {"asin", 1},  {"acos", 1},  {"atan", 1},
            {"sinh", 1}, {"cosh", 1},    {"asinh", 1}, {"acosh", 1}, {"atanh", 1}, {"tanh", 1},
            {"erf", 1},  {"sigmoid", 1}, {"pow", 2},   {"fma", 3}};
        auto it = kArity.find(op->name);
        KILN_USER_CHECK(it != kArity.end()) << "device codegen: kernel '" << name_
                                            << "': unknown pure intrinsic '" << op->name << "'";
        KILN_USER_CHECK(op->args.size() == it->second)
            << "device codegen: kernel '" << name_ << "': intrinsic '" << op->name << "' takes "
            << it->second << " arguments, got " << op->args.size();
        return math_call(op->name, op->dtype.element_of(), op->args, lane);
      }
      case ir::CallKind::kIntrinsic:
        if (op->name == "likely" && op->args.size() == 1) return expr(op->args[0], lane);
        KILN_USER_ERROR() << "device codegen: kernel '" << name_ << "': intrinsic '" << op->name
                          << "' cannot be used as a value in device code (known: likely)";
      case ir::CallKind::kExtern: {
        std::string s = op->name + "(";
        for (size_t i = 0; i < op->args.size(); ++i)
          s += (i ? ", " : "") + expr(op->args[i], lane).text;
        return {s + ")", kPrecAtom};
      }
    }
    KILN_UNREACHABLE();
  }

  /// The contiguous base of a vector access that can be one wide access, or nothing.
  std::optional<Expr> wide_base(const ir::VarNode* buf, const Expr& index, const Expr& predicate,
                                DataType t) {
    if (predicate.defined() || t.is_scalar()) return std::nullopt;
    auto* ramp = index.as<ir::RampNode>();
    if (ramp == nullptr || !ir::is_one(ramp->stride)) return std::nullopt;
    const BufferInfo& info = buffer(buf);
    if (info.scope == "local" || !d_.has_wide_access(t)) return std::nullopt;
    const int align = d_.wide_access_alignment(t);
    if (align > 0 && (ir::known_multiple(ramp->base) * t.bytes()) % align != 0) return std::nullopt;
    return ramp->base;
  }

  std::string address(const ir::VarNode* buf, const Expr& base) {
    return name_of(buf) + " + " + wrap(expr(base), kPrecAdd + 1);
  }

  CExpr load(const ir::LoadNode* op, int lane) {
    const ir::VarNode* buf = op->buffer_var.get();
    check_element(buf, op->dtype);
    if (lane >= 0) {
      if (auto base = wide_base(buf, op->index, op->predicate, op->dtype)) {
        auto [it, fresh] = wide_loads_.emplace(op, std::string());
        if (fresh) {
          const std::string value = d_.wide_load(op->dtype, address(buf, *base));
          it->second = temporary(name_of(buf) + "_vec");
          line(d_.type_name(op->dtype) + " " + it->second + " = " + value + ";");
        }
        return {it->second + d_.lane_field(op->dtype, lane), kPrecAtom};
      }
    }
    CExpr access{name_of(buf) + "[" + expr(op->index, lane).text + "]", kPrecAtom};
    if (!op->predicate.defined()) return access;
    return {wrap(expr(op->predicate, lane), kPrecTernary + 1) + " ? " + access.text + " : " +
                literal(ir::make_zero(op->dtype.element_of())).text,
            kPrecTernary};
  }

  void check_element(const ir::VarNode* buf, DataType t) {
    const BufferInfo& info = buffer(buf);
    KILN_USER_CHECK(info.elem == t.element_of())
        << "device codegen: kernel '" << name_ << "' accesses '" << buf->name << "' of "
        << info.elem.str() << " as " << t.str();
  }

  /// Declares the value of a Let before the current statement; returns its name.
  std::string hoist_let(const ir::LetNode* op) {
    auto [it, fresh] = hoisted_lets_.emplace(op, std::string());
    if (fresh) {
      it->second = declare(op->var, op->value);
      names_.erase(op->var.get());
    }
    return it->second;
  }

  /// Declares `var = value` (an array of lanes for a vector) at the current indent.
  std::string declare(const ir::Var& var, const Expr& value) {
    const DataType t = value.dtype();
    if (t.is_scalar()) {
      const std::string v = expr(value).text;
      const std::string name = define(var.get(), var.name());
      line(d_.type_name(t) + " " + name + " = " + v + ";");
      return name;
    }
    std::vector<std::string> lanes;
    for (int i = 0; i < t.lanes(); ++i) lanes.push_back(expr(value, i).text);
    const std::string name = define(var.get(), var.name());
    std::string s =
        d_.type_name(t.element_of()) + " " + name + "[" + std::to_string(t.lanes()) + "] = {";
    for (size_t i = 0; i < lanes.size(); ++i) s += (i ? ", " : "") + lanes[i];
    line(s + "};");
    return name;
  }

  std::string temporary(const std::string& hint) {
    std::string name = hint;
    for (int i = 1; taken_.count(name); ++i) name = hint + "_" + std::to_string(i);
    taken_.insert(name);
    scopes_.back().names.push_back(name);
    return name;
  }

  // ---- statements ----

  void line(const std::string& s) {
    for (int i = 0; i < indent_; ++i) out_ << "  ";
    out_ << s << "\n";
  }

  /// Temporaries of one statement's expressions do not outlive it (memory may change).
  void begin_statement() {
    wide_loads_.clear();
    hoisted_lets_.clear();
  }

  void block(const Stmt& s) {
    indent_ += 1;
    scopes_.emplace_back();
    stmt(s);
    pop_scope();
    indent_ -= 1;
  }

  /// Closes a C block: the names declared in it are free again.
  void pop_scope() {
    for (const std::string& n : scopes_.back().names) taken_.erase(n);
    scopes_.pop_back();
  }

  void stmt(const Stmt& s) {
    if (!s.defined()) return;
    begin_statement();
    switch (s.kind()) {
      case StmtKind::kLetStmt: {
        auto* op = s.as<ir::LetStmtNode>();
        if (auto* src = op->value.as<ir::VarNode>(); src != nullptr && buffers_.count(src)) {
          // Another name for a buffer: accesses through it print the buffer's name.
          names_[op->var.get()] = name_of(src);
          buffers_[op->var.get()] = buffers_[src];
          return stmt(op->body);
        }
        declare(op->var, op->value);
        return stmt(op->body);
      }
      case StmtKind::kAttrStmt:
        return attr(s.as<ir::AttrStmtNode>());
      case StmtKind::kAssertStmt: {
        auto* op = s.as<ir::AssertStmtNode>();
        line(d_.assertion(expr(op->condition).text, op->message));
        return stmt(op->body);
      }
      case StmtKind::kFor:
        return loop(s.as<ir::ForNode>());
      case StmtKind::kStore:
        return store(s.as<ir::StoreNode>());
      case StmtKind::kAllocate:
        return allocate(s.as<ir::AllocateNode>());
      case StmtKind::kIfThenElse: {
        auto* op = s.as<ir::IfThenElseNode>();
        line("if (" + expr(op->condition).text + ") {");
        block(op->then_case);
        if (op->else_case.defined()) {
          line("} else {");
          block(op->else_case);
        }
        line("}");
        return;
      }
      case StmtKind::kSeq:
        for (const Stmt& x : s.as<ir::SeqNode>()->seq) stmt(x);
        return;
      case StmtKind::kEvaluate:
        return evaluate(s.as<ir::EvaluateNode>()->value);
      case StmtKind::kProducerStore:
      case StmtKind::kProducerRealize:
        KILN_USER_ERROR() << "device codegen: kernel '" << name_
                          << "' still contains tensor-level statements; lower the schedule "
                             "(storage flattening) first";
    }
  }

  void attr(const ir::AttrStmtNode* op) {
    if (op->key == ir::attr::kVirtualThread) {
      KILN_USER_ERROR() << "device codegen: kernel '" << name_
                        << "' still has a virtual thread; inject_virtual_thread must run first";
    }
    if (op->key != ir::attr::kThreadExtent) return stmt(op->body);
    auto* iv = static_cast<const ir::IterVarNode*>(op->node.get());
    const ir::VarNode* v = iv->var.get();
    if (used_.count(v) && !in_scope(v)) {
      const std::string index = d_.thread_index(iv->thread_tag);
      line(d_.type_name(iv->var.dtype()) + " " + define(v, iv->var.name()) + " = " + index + ";");
      ir::Interval range;
      range.min = ir::make_zero(iv->var.dtype());
      if (ir::as_const_int(op->value)) range.max = op->value - 1;
      dom_[v] = range;
    }
    stmt(op->body);
  }

  void loop(const ir::ForNode* op) {
    const ir::Var& var = op->loop_var;
    KILN_USER_CHECK(var.dtype().is_int() && var.dtype().is_scalar())
        << "device codegen: loop variable '" << var.name() << "' of kernel '" << name_
        << "' must be a signed integer, got " << var.dtype().str();
    const std::string min = expr(op->min).text;
    const std::string end = expr(ir::is_zero(op->min) ? op->extent : op->min + op->extent).text;
    if (op->for_kind == ir::ForKind::kUnrolled) line("#pragma unroll");
    scopes_.emplace_back();
    const std::string name = define(var.get(), var.name());
    line("for (" + d_.type_name(var.dtype()) + " " + name + " = " + min + "; " + name + " < " +
         end + "; ++" + name + ") {");
    dom_[var.get()] = ir::Interval::from_range(ir::Range(op->min, op->extent));
    indent_ += 1;
    stmt(op->body);
    indent_ -= 1;
    dom_.erase(var.get());
    pop_scope();
    line("}");
  }

  void store(const ir::StoreNode* op) {
    const ir::VarNode* buf = op->buffer_var.get();
    const DataType t = op->value.dtype();
    check_element(buf, t);
    if (t.is_scalar()) {
      const std::string index = expr(op->index).text;
      const std::string value = expr(op->value).text;
      std::string s = name_of(buf) + "[" + index + "] = " + value + ";";
      if (op->predicate.defined()) s = "if (" + expr(op->predicate).text + ") " + s;
      return line(s);
    }
    if (auto base = wide_base(buf, op->index, op->predicate, t)) {
      std::string value;
      auto* load = op->value.as<ir::LoadNode>();
      if (load != nullptr && load->buffer_var.get() != buf) {
        check_element(load->buffer_var.get(), load->dtype);
        if (auto from = wide_base(load->buffer_var.get(), load->index, load->predicate, t)) {
          value = d_.wide_load(t, address(load->buffer_var.get(), *from));
        }
      }
      if (value.empty()) value = d_.vector_literal(t, lanes(op->value));
      return line(d_.wide_store(t, address(buf, *base), value));
    }
    // Lane by lane; every lane is read before any is written.
    std::vector<std::string> values = lanes(op->value);
    bool reads_self = false;
    ir::post_order_visit(op->value, [&](const ir::Object* n) {
      if (auto* l = dynamic_cast<const ir::LoadNode*>(n)) reads_self |= l->buffer_var.get() == buf;
    });
    if (reads_self) {
      const std::string tmp = temporary(name_of(buf) + "_lanes");
      std::string s =
          d_.type_name(t.element_of()) + " " + tmp + "[" + std::to_string(t.lanes()) + "] = {";
      for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + values[i];
      line(s + "};");
      for (int i = 0; i < t.lanes(); ++i) values[i] = tmp + "[" + std::to_string(i) + "]";
    }
    for (int i = 0; i < t.lanes(); ++i) {
      std::string s = name_of(buf) + "[" + expr(op->index, i).text + "] = " + values[i] + ";";
      if (op->predicate.defined()) s = "if (" + expr(op->predicate, i).text + ") " + s;
      line(s);
    }
  }

  std::vector<std::string> lanes(const Expr& e) {
    std::vector<std::string> out;
    for (int i = 0; i < e.dtype().lanes(); ++i) out.push_back(expr(e, i).text);
    return out;
  }

  void allocate(const ir::AllocateNode* op) {
    if (op->scope == "shared") return stmt(op->body);  // declared at the top of the kernel
    KILN_USER_CHECK(op->scope == "local")
        << "device codegen: kernel '" << name_ << "' allocates '" << op->buffer_var.name()
        << "' in " << op->scope
        << " memory; a kernel allocates only shared and local memory (global scratch is a "
           "workspace of the device function)";
    const int64_t n = elements(op);
    const std::string name = define(op->buffer_var.get(), op->buffer_var.name());
    buffers_[op->buffer_var.get()] = {op->dtype.element_of(), "local"};
    line(memory_type(op->dtype.element_of()) + " " + name + "[" + std::to_string(n) + "];");
    stmt(op->body);
  }

  void evaluate(const Expr& value) {
    if (value.as<ir::IntImmNode>()) return;
    auto* call = value.as<ir::CallNode>();
    if (call != nullptr && call->call_kind == ir::CallKind::kIntrinsic &&
        call->name == "kiln.storage_sync") {
      auto* scope = call->args.size() == 1 ? call->args[0].as<ir::StringImmNode>() : nullptr;
      KILN_USER_CHECK(scope != nullptr && (scope->value == "shared" || scope->value == "warp"))
          << "device codegen: kernel '" << name_
          << "': kiln.storage_sync takes one scope, \"shared\" or \"warp\"";
      const std::string b = d_.barrier(scope->value);
      if (!b.empty()) line(b);
      return;
    }
    if (ir::has_side_effects(value)) line(expr(value).text + ";");
  }

  const DeviceDialect& d_;
  std::set<std::string>* helpers_;
  bool* uses_half_;
  bool* uses_double_;

  std::string name_;
  std::ostringstream out_;
  int indent_ = 0;
  std::unordered_map<const ir::VarNode*, std::string> names_;
  std::set<std::string> taken_;
  /// The C blocks open at the point of printing: their variables and the names they declared.
  struct Scope {
    std::unordered_set<const ir::VarNode*> vars;
    std::vector<std::string> names;
  };
  std::vector<Scope> scopes_;
  std::unordered_map<const ir::VarNode*, BufferInfo> buffers_;
  std::unordered_set<const ir::VarNode*> written_;
  std::unordered_set<const ir::VarNode*> used_;  ///< variables some expression reads
  std::vector<const ir::AllocateNode*> shared_;
  std::map<std::string, int64_t> extents_;  ///< thread tag -> constant extent, -1 when not constant
  ir::VarIntervals dom_;
  std::unordered_map<const ir::LoadNode*, std::string> wide_loads_;
  std::unordered_map<const ir::LetNode*, std::string> hoisted_lets_;
};

/// The floor division helpers kernels may call, for 32- and 64-bit signed integers.
std::string helper_source(const std::string& helper, const DeviceDialect& d) {
  const bool div = helper.find("floordiv") != std::string::npos;
  const std::string t = d.type_name(helper.ends_with("_i64") ? ir::kInt64 : ir::kInt32);
  std::ostringstream os;
  os << d.helper_prefix() << " " << t << " " << helper << "(" << t << " a, " << t << " b) {\n";
  if (div) {
    os << "  " << t << " q = a / b;\n"
       << "  return a % b != 0 && (a % b < 0) != (b < 0) ? q - 1 : q;\n";
  } else {
    os << "  " << t << " r = a % b;\n"
       << "  return r != 0 && (r < 0) != (b < 0) ? r + b : r;\n";
  }
  os << "}\n";
  return os.str();
}

}  // namespace

std::string element_type_base(DataType t, const std::string& int64) {
  const std::string integer = t.bits() == 8    ? "char"
                              : t.bits() == 16 ? "short"
                              : t.bits() == 64 ? int64
                                               : "int";
  switch (t.code()) {
    case ir::TypeCode::kBool:
      return "bool";
    case ir::TypeCode::kInt:
      return integer;
    case ir::TypeCode::kUInt:
      return "u" + integer;
    case ir::TypeCode::kFloat:
      return t.bits() == 16 ? "half" : t.bits() == 64 ? "double" : "float";
    case ir::TypeCode::kHandle:
      return "void*";
  }
  return "void";
}

std::string print_device_c(const std::vector<ir::PrimFunc>& funcs, const DeviceDialect& dialect) {
  std::set<std::string> helpers;
  bool uses_half = false, uses_double = false;
  std::vector<std::string> kernels;
  for (const ir::PrimFunc& f : funcs) {
    kernels.push_back(KernelPrinter(dialect, &helpers, &uses_half, &uses_double).print(f));
  }
  std::string out = dialect.preamble(uses_half, uses_double);
  for (const std::string& h : helpers) out += (out.empty() ? "" : "\n") + helper_source(h, dialect);
  for (const std::string& k : kernels) out += (out.empty() ? "" : "\n") + k;
  return out;
}

}  // namespace kiln::codegen
