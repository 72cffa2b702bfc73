// Tensor intrinsics and the matching of a tensorized loop nest against one.
#include "compiler/te/tensorize.h"

#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "base/error.h"
#include "compiler/ir/equal.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/simplify.h"
#include "compiler/ir/substitute.h"

namespace kiln::te {

TensorIntrin decl_tensor_intrin(const Tensor& op, ir::IntrinLowerFn lower, std::string name) {
  KILN_USER_CHECK(!name.empty()) << "decl_tensor_intrin: the intrinsic needs a name";
  KILN_USER_CHECK(op.defined() && op->is_compute())
      << "decl_tensor_intrin '" << name << "': its declaration must be a compute";
  KILN_USER_CHECK(lower != nullptr) << "decl_tensor_intrin '" << name << "': no lowering function";
  auto n = std::make_shared<TensorIntrinNode>();
  n->name = std::move(name);
  n->lower = std::move(lower);
  n->op = op;
  n->inputs = op->inputs();
  for (const Tensor& in : n->inputs) {
    KILN_USER_CHECK(!in->is_compute())
        << "decl_tensor_intrin '" << n->name << "': its compute reads '" << in->name()
        << "', which is not a placeholder";
  }
  return n;
}

namespace {

/// The tensors an expression reads, in order of first read.
std::vector<ir::Producer> reads_in_order(const Expr& e) {
  std::vector<ir::Producer> out;
  std::unordered_set<const ir::ProducerNode*> seen;
  ir::post_order_visit(e, [&](const ir::Object* n) {
    if (auto l = dynamic_cast<const ir::ProducerLoadNode*>(n)) {
      if (seen.insert(l->producer.get()).second) out.push_back(l->producer);
    }
  });
  return out;
}

/// The call group of one buffer: its intrinsic rank, the region's first element and the elements
/// one step along each of the intrinsic's dimensions (the trailing ones of the tensor).
void append_buffer(std::vector<Expr>* args, const ir::Producer& p, const std::vector<Expr>& begin,
                   size_t rank) {
  args->push_back(ir::make_const(ir::kInt32, static_cast<int64_t>(rank)));
  args->push_back(ir::producer_load(p, begin));
  const size_t lead = begin.size() - rank;
  for (size_t j = 0; j < rank; ++j) {
    std::vector<Expr> step = begin;
    step[lead + j] = ir::simplify(step[lead + j] + 1);
    args->push_back(ir::producer_load(p, step));
  }
}

}  // namespace

TensorizedCalls tensorize_calls(const StageNode& s, size_t pos, const RangeMap& ranges,
                                const ValueMap& values, const std::vector<Expr>& guards) {
  const auto& leaves = s.leaf_iter_vars;
  const TensorIntrin& intrin = s.attr(leaves[pos]).tensor_intrin;
  const TensorNode& decl = *intrin->op.get();
  const Tensor& t = s.op;
  std::ostringstream w;
  w << "tensorize: stage '" << s.name() << "', axis '" << leaves[pos].var().name()
    << "', intrinsic '" << intrin->name << "': ";
  const std::string where = w.str();

  // The loops inside the axis, data-parallel ones to the intrinsic's axes and reduction ones to
  // its reduction axes, in order, with equal constant extents.
  std::vector<IterVar> dp, rd;
  std::unordered_set<const ir::VarNode*> inner;
  for (size_t i = pos; i < leaves.size(); ++i) {
    const IterVar& iv = leaves[i];
    KILN_USER_CHECK(!s.attr(iv).bind_thread.defined())
        << where << "loop '" << iv.var().name() << "' inside it is bound to a thread";
    (iv->type == ir::IterVarType::kCommReduce ? rd : dp).push_back(iv);
    inner.insert(iv.var().get());
  }
  auto names = [](const std::vector<IterVar>& ivs) {
    std::string out;
    for (auto& iv : ivs) out += (out.empty() ? "" : ", ") + iv.var().name();
    return out.empty() ? std::string("none") : out;
  };
  KILN_USER_CHECK(dp.size() == decl.axis.size() && rd.size() == decl.reduce_axis.size())
      << where << "the loops from it inward are " << dp.size() << " data-parallel (" << names(dp)
      << ") and " << rd.size() << " reduction (" << names(rd) << "), but the intrinsic has "
      << decl.axis.size() << " axes and " << decl.reduce_axis.size() << " reduction axes";
  ir::VarMap to_decl, to_zero;
  // The intrinsic's axes lie in their domains: a read's index relative to its region simplifies
  // with them (floordiv(16 * b + j, 16) - b is 0 for j < 16, a packed operand's block). Not an
  // axis of extent 1, which would simplify to 0 where the output's index must name it.
  ir::VarIntervals decl_dom;
  for (const auto* axes : {&decl.axis, &decl.reduce_axis}) {
    for (const IterVar& iv : *axes) {
      if (!ir::is_one(iv->dom.extent)) decl_dom[iv.var().get()] = ir::Interval::from_range(iv->dom);
    }
  }
  auto map_loops = [&](const std::vector<IterVar>& loops, const std::vector<IterVar>& axes) {
    for (size_t k = 0; k < loops.size(); ++k) {
      const Expr& ext = ranges.at(loops[k].get()).extent;
      KILN_USER_CHECK(ir::can_prove(ext == axes[k]->dom.extent))
          << where << "loop '" << loops[k].var().name() << "' has extent " << ir::to_string(ext)
          << " but the intrinsic's axis '" << axes[k].var().name() << "' has extent "
          << ir::to_string(axes[k]->dom.extent);
      to_decl[loops[k].var().get()] = axes[k].var() + axes[k]->dom.min;
      to_zero[loops[k].var().get()] = ir::make_zero(loops[k].var().dtype());
    }
  };
  map_loops(dp, decl.axis);
  map_loops(rd, decl.reduce_axis);

  std::vector<Expr> outer_guards;
  for (const Expr& g : guards) {
    KILN_USER_CHECK(!ir::uses_var(g, [&](const ir::VarNode* v) { return inner.count(v) > 0; }))
        << where << "a split that does not divide its axis leaves the guard " << ir::to_string(g)
        << " on the loops inside it; the intrinsic needs whole blocks";
    outer_guards.push_back(g);
  }

  // The output: its index relative to the region's start must be the intrinsic's axes, in its
  // trailing dimensions.
  KILN_USER_CHECK(t->dtype() == decl.dtype()) << where << "the stage computes " << t->dtype().str()
                                              << ", the intrinsic " << decl.dtype().str();
  const size_t n = t->axis.size(), m = decl.axis.size();
  KILN_USER_CHECK(n >= m) << where << "the stage has " << n
                          << " dimensions, the intrinsic's output " << m;
  std::vector<Expr> out_begin;
  for (size_t d = 0; d < n; ++d) {
    const Expr& idx = values.at(t->axis[d].get());
    out_begin.push_back(ir::simplify(ir::substitute(idx, to_zero)));
    const Expr rel = ir::simplify(ir::substitute(idx, to_decl) - out_begin.back(), decl_dom);
    const bool ok =
        d < n - m ? ir::is_zero(rel) : ir::expr_deep_equal(rel, decl.axis[d - (n - m)].var());
    KILN_USER_CHECK(ok) << where << "dimension " << d << " of the output moves by "
                        << ir::to_string(rel)
                        << " inside the tensorized loops, where the intrinsic expects "
                        << (d < n - m ? std::string("0") : decl.axis[d - (n - m)].var().name());
  }

  // The body: reads taken relative to their regions and renamed to the intrinsic's placeholders.
  const auto* red = t->body.as<ir::ReduceNode>();
  const auto* decl_red = decl.body.as<ir::ReduceNode>();
  KILN_USER_CHECK((red != nullptr) == (decl_red != nullptr))
      << where
      << (red ? "the stage is a reduction, the intrinsic is not"
              : "the intrinsic is a reduction, the stage is not");
  if (red) {
    KILN_USER_CHECK(red->combiner == decl_red->combiner)
        << where << "the stage reduces by " << ir::reduce_kind_name(red->combiner)
        << ", the intrinsic by " << ir::reduce_kind_name(decl_red->combiner);
    KILN_USER_CHECK(ir::is_one(red->condition) && ir::is_one(decl_red->condition))
        << where << "reductions with a condition cannot be tensorized";
  }
  ir::VarMap root;
  for (auto& iv : t->axis) root[iv.var().get()] = values.at(iv.get());
  for (auto& iv : t->reduce_axis) root[iv.var().get()] = values.at(iv.get());
  const Expr src = ir::substitute(red ? red->source : t->body, root);
  const Expr decl_src = red ? decl_red->source : decl.body;

  const std::vector<ir::Producer> reads = reads_in_order(src);
  const std::vector<ir::Producer> decl_reads = reads_in_order(decl_src);
  KILN_USER_CHECK(reads.size() == decl_reads.size())
      << where << "the stage reads " << reads.size() << " tensors, the intrinsic "
      << decl_reads.size();
  std::unordered_map<const ir::ProducerNode*, size_t> slot;
  for (size_t k = 0; k < reads.size(); ++k) slot[reads[k].get()] = k;
  std::vector<std::vector<Expr>> begins(reads.size());
  const Expr rewritten =
      rewrite_reads(src, [&](const TensorNode* tn, const std::vector<Expr>& idx) -> Expr {
        const size_t k = slot.at(tn);
        const ir::ProducerNode* ph = decl_reads[k].get();
        KILN_USER_CHECK(tn->dtype() == ph->dtype())
            << where << "'" << tn->name() << "' holds " << tn->dtype().str()
            << " where the intrinsic's '" << ph->name() << "' holds " << ph->dtype().str();
        const size_t rank = ph->shape().size();
        KILN_USER_CHECK(idx.size() >= rank)
            << where << "'" << tn->name() << "' has fewer dimensions than the intrinsic's '"
            << ph->name() << "'";
        std::vector<Expr> begin, rel;
        for (const Expr& e : idx) {
          begin.push_back(ir::simplify(ir::substitute(e, to_zero)));
          rel.push_back(ir::simplify(ir::substitute(e, to_decl) - begin.back(), decl_dom));
        }
        if (begins[k].empty()) {
          begins[k] = begin;
        } else {
          for (size_t d = 0; d < begin.size(); ++d) {
            KILN_USER_CHECK(ir::can_prove(begins[k][d] == begin[d]))
                << where << "'" << tn->name() << "' is read in two regions";
          }
        }
        const size_t lead = idx.size() - rank;
        for (size_t d = 0; d < lead; ++d) {
          KILN_USER_CHECK(ir::is_zero(rel[d]))
              << where << "dimension " << d << " of '" << tn->name() << "' moves by "
              << ir::to_string(rel[d]) << " inside the tensorized loops; the intrinsic's '"
              << ph->name() << "' covers only its last " << rank << " dimensions";
        }
        return ir::producer_load(decl_reads[k], std::vector<Expr>(rel.begin() + lead, rel.end()));
      });
  // The loops' variables used as values (not as indices of a read: a scatter compares an index
  // it reads with its output's coordinate) are the intrinsic's axes too; a variable of a loop
  // outside the tensorized axis stays, and the intrinsic, which has none, does not match.
  // Both sides with the axes' domains, as the reads' indices were.
  const Expr lhs = ir::simplify(ir::substitute(rewritten, to_decl), decl_dom),
             rhs = ir::simplify(decl_src, decl_dom);
  KILN_USER_CHECK(ir::expr_deep_equal(lhs, rhs))
      << where << "the loops compute " << ir::to_string(lhs) << " but the intrinsic computes "
      << ir::to_string(rhs);

  // The calls: the inputs' regions, then the output's.
  // The reset sees no input regions (they may not be live where it runs): a rank of -1.
  auto call = [&](const char* part, const std::vector<std::vector<Expr>>* in_begins) {
    std::vector<Expr> args;
    for (size_t k = 0; k < reads.size(); ++k) {
      if (in_begins) {
        append_buffer(&args, reads[k], (*in_begins)[k], decl_reads[k]->shape().size());
      } else {
        args.push_back(ir::make_const(ir::kInt32, int64_t{-1}));
      }
    }
    append_buffer(&args, t.node(), out_begin, m);
    ir::Stmt c = ir::attr_stmt(intrin, ir::attr::kTensorize, ir::make_string(part),
                               ir::evaluate(ir::call(ir::kInt32, ir::kTensorizeArgs,
                                                     std::move(args), ir::CallKind::kIntrinsic)));
    return c;
  };
  auto guarded = [](const std::vector<Expr>& gs, ir::Stmt body) {
    Expr cond;
    for (auto& g : gs) cond = cond.defined() ? (cond && g) : g;
    return cond.defined() ? ir::if_then_else(cond, std::move(body)) : body;
  };
  bool outer_reduce = false;
  ir::VarMap outer_reduce_zero;
  for (size_t i = 0; i < pos; ++i) {
    if (leaves[i]->type == ir::IterVarType::kCommReduce) {
      outer_reduce = true;
      outer_reduce_zero[leaves[i].var().get()] = ir::make_zero(leaves[i].var().dtype());
    }
  }
  TensorizedCalls out;
  if (!outer_reduce) {
    out.body = guarded(outer_guards, call("body", &begins));
    return out;
  }
  out.update = guarded(outer_guards, call("update", &begins));
  std::vector<Expr> reset_guards;
  for (const Expr& g : outer_guards) {
    if (!ir::uses_var(g, [&](const ir::VarNode* v) { return outer_reduce_zero.count(v) > 0; })) {
      reset_guards.push_back(g);
    }
  }
  out.reset = guarded(reset_guards, call("reset", nullptr));
  return out;
}

}  // namespace kiln::te
