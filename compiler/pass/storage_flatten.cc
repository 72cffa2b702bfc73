// Storage flattening: realizes become allocations, tensor loads and stores become flat ones.
#include "compiler/pass/storage_flatten.h"

#include <string>
#include <utility>
#include <vector>

#include "base/error.h"
#include "compiler/ir/functor.h"
#include "compiler/ir/op.h"
#include "compiler/ir/simplify.h"

namespace kiln::pass {
namespace {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

/// A producer realized in the scope being mutated: its flat storage and its region.
struct Realized {
  Var data;
  std::vector<Range> bounds;
};

class StorageFlattener : public IRMutator {
 public:
  explicit StorageFlattener(const std::unordered_map<const ProducerNode*, Buffer>& bound)
      : bound_(bound) {}
  using IRMutator::mutate;

 protected:
  Stmt mutate_(const ProducerRealizeNode* op, const Stmt& self) override {
    const ProducerNode* p = op->producer.get();
    if (bound_.count(p)) return mutate(op->body);  // the argument's buffer is the storage

    Realized r{Var(p->name(), DataType::Handle()), {}};
    Expr size = make_const(kInt32, int64_t{1});
    for (const Range& b : op->bounds) {
      Range nb(mutate(b.min), mutate(b.extent));
      size = size * nb.extent;
      r.bounds.push_back(std::move(nb));
    }
    Var data = r.data;
    // Realizes of one producer may nest (the inner one shadows); restore the outer on the way out.
    auto saved = realized_.extract(p);
    realized_.emplace(p, std::move(r));
    Stmt body = mutate(op->body);
    realized_.erase(p);
    if (!saved.empty()) realized_.insert(std::move(saved));
    return allocate(data, p->dtype(), {simplify(size)}, op->scope, body);
  }

  Expr mutate_(const ProducerLoadNode* op, const Expr& self) override {
    std::vector<Expr> indices;
    mutate_all(op->indices, &indices);
    auto [data, index] = flatten(op->producer.get(), indices);
    return load(op->dtype, data, index);
  }

  Stmt mutate_(const ProducerStoreNode* op, const Stmt& self) override {
    Expr value = mutate(op->value);
    std::vector<Expr> indices;
    mutate_all(op->indices, &indices);
    auto [data, index] = flatten(op->producer.get(), indices);
    return store(data, value, index);
  }

 private:
  /// The flat buffer of `p` and the flat index of `indices` in it.
  std::pair<Var, Expr> flatten(const ProducerNode* p, const std::vector<Expr>& indices) const {
    if (auto it = bound_.find(p); it != bound_.end()) {
      return {it->second.data, simplify(it->second.flat_index(indices))};
    }
    auto it = realized_.find(p);
    KILN_ICHECK(it != realized_.end())
        << "storage_flatten: tensor '" << p->name()
        << "' is accessed but is neither a bound argument nor realized around the access";
    const std::vector<Range>& bounds = it->second.bounds;
    KILN_ICHECK(bounds.size() == indices.size())
        << "storage_flatten: tensor '" << p->name() << "' is realized with " << bounds.size()
        << " dimensions but accessed with " << indices.size();
    Expr index = make_const(kInt32, int64_t{0});
    for (size_t d = 0; d < indices.size(); ++d) {
      Expr offset = indices[d] - bounds[d].min;
      index = d == 0 ? offset : index * bounds[d].extent + offset;
    }
    return {it->second.data, simplify(index)};
  }

  const std::unordered_map<const ProducerNode*, Buffer>& bound_;
  std::unordered_map<const ProducerNode*, Realized> realized_;
};

}  // namespace

ir::Stmt storage_flatten(
    const ir::Stmt& s,
    const std::unordered_map<const ir::ProducerNode*, ir::Buffer>& bound_buffers) {
  return StorageFlattener(bound_buffers).mutate(s);
}

}  // namespace kiln::pass
