// ONNX Einsum (einsum.h).
#include "compiler/topi/einsum.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "base/error.h"
#include "compiler/ir/op.h"

namespace kiln::topi {
namespace {

constexpr int kEllipsisLabel = 64;

int letter_label(char ch) {
  if (ch >= 'a' && ch <= 'z') return ch - 'a';
  if (ch >= 'A' && ch <= 'Z') return 26 + (ch - 'A');
  return -1;
}

std::string label_name(int l) {
  if (l >= kEllipsisLabel) return "ellipsis axis " + std::to_string(l - kEllipsisLabel);
  return std::string("'") + static_cast<char>(l < 26 ? 'a' + l : 'A' + (l - 26)) + "'";
}

/// One term's letters with the ellipsis's position (-1 when it has none).
struct Term {
  std::vector<int> letters;
  int ellipsis_at = -1;
};

Term parse_term(const std::string& eq, const std::string& t) {
  Term term;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '.') {
      KILN_USER_CHECK(t.compare(i, 3, "...") == 0 && term.ellipsis_at < 0)
          << "einsum '" << eq << "': term '" << t << "' has a '.' that is not one ellipsis '...'";
      term.ellipsis_at = static_cast<int>(term.letters.size());
      i += 2;
      continue;
    }
    const int l = letter_label(t[i]);
    KILN_USER_CHECK(l >= 0) << "einsum '" << eq << "': term '" << t << "' has the character '"
                            << t[i] << "' (axes are letters a-z, A-Z)";
    term.letters.push_back(l);
  }
  return term;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts(1);
  for (char ch : s) {
    if (ch == sep) {
      parts.emplace_back();
    } else {
      parts.back() += ch;
    }
  }
  return parts;
}

}  // namespace

EinsumSpec parse_einsum(const std::string& equation, const std::vector<size_t>& ranks) {
  std::string eq;
  for (char ch : equation) {
    if (ch != ' ') eq += ch;
  }
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  const std::vector<std::string> terms = split(lhs, ',');
  KILN_USER_CHECK(terms.size() == ranks.size())
      << "einsum '" << equation << "' has " << terms.size() << " input terms for " << ranks.size()
      << " operands";
  EinsumSpec spec;
  std::map<int, int> count;
  for (size_t k = 0; k < terms.size(); ++k) {
    const Term t = parse_term(equation, terms[k]);
    const size_t letters = t.letters.size();
    const bool ell = t.ellipsis_at >= 0;
    KILN_USER_CHECK(ell ? letters <= ranks[k] : letters == ranks[k])
        << "einsum '" << equation << "': term '" << terms[k] << "' names " << letters
        << " axes, but operand " << k << " has rank " << ranks[k];
    const int e = ell ? static_cast<int>(ranks[k] - letters) : 0;
    spec.ellipsis_rank = std::max(spec.ellipsis_rank, e);
    std::vector<int> labels;
    for (size_t i = 0; i <= letters; ++i) {
      if (static_cast<int>(i) == t.ellipsis_at) {
        // Right-aligned: this operand's ellipsis covers the last e of the output's ellipsis axes,
        // counted from the right here (-e .. -1) until the widest ellipsis is known.
        for (int a = 0; a < e; ++a) labels.push_back(a - e);
      }
      if (i < letters) {
        labels.push_back(t.letters[i]);
        ++count[t.letters[i]];
      }
    }
    spec.inputs.push_back(std::move(labels));
  }
  for (auto& labels : spec.inputs) {
    for (int& l : labels) {
      if (l < 0) l += kEllipsisLabel + spec.ellipsis_rank;
    }
  }
  if (arrow == std::string::npos) {
    for (int a = 0; a < spec.ellipsis_rank; ++a) spec.output.push_back(kEllipsisLabel + a);
    for (const auto& [l, c] : count) {
      if (c == 1) spec.output.push_back(l);
    }
  } else {
    const std::string rhs = eq.substr(arrow + 2);
    KILN_USER_CHECK(rhs.find("->") == std::string::npos && rhs.find(',') == std::string::npos)
        << "einsum '" << equation << "' has one output term";
    const Term t = parse_term(equation, rhs);
    KILN_USER_CHECK(t.ellipsis_at >= 0 || spec.ellipsis_rank == 0)
        << "einsum '" << equation << "': the output must keep the ellipsis's " << spec.ellipsis_rank
        << " axes";
    for (size_t i = 0; i <= t.letters.size(); ++i) {
      if (static_cast<int>(i) == t.ellipsis_at) {
        for (int a = 0; a < spec.ellipsis_rank; ++a) spec.output.push_back(kEllipsisLabel + a);
      }
      if (i == t.letters.size()) break;
      const int l = t.letters[i];
      KILN_USER_CHECK(count.count(l))
          << "einsum '" << equation << "': output axis " << label_name(l) << " is in no input term";
      KILN_USER_CHECK(std::count(t.letters.begin(), t.letters.end(), l) == 1)
          << "einsum '" << equation << "': output axis " << label_name(l) << " is given twice";
      spec.output.push_back(l);
    }
  }
  return spec;
}

namespace {

/// Each label's size: letters must agree exactly; an ellipsis axis broadcasts from 1.
std::map<int, int64_t> label_sizes(const std::string& equation, const EinsumSpec& spec,
                                   const std::vector<std::vector<int64_t>>& shapes) {
  std::map<int, int64_t> size;
  for (size_t k = 0; k < spec.inputs.size(); ++k) {
    for (size_t d = 0; d < spec.inputs[k].size(); ++d) {
      const int l = spec.inputs[k][d];
      const int64_t n = shapes[k][d];
      auto [it, fresh] = size.emplace(l, n);
      if (fresh || it->second == n) continue;
      const bool broadcast = l >= kEllipsisLabel && (it->second == 1 || n == 1);
      KILN_USER_CHECK(broadcast) << "einsum '" << equation << "': axis " << label_name(l) << " is "
                                 << it->second << " in one operand and " << n << " in operand "
                                 << k;
      it->second = std::max(it->second, n);
    }
  }
  return size;
}

}  // namespace

std::vector<int64_t> einsum_shape(const std::string& equation,
                                  const std::vector<std::vector<int64_t>>& shapes) {
  std::vector<size_t> ranks;
  for (const auto& s : shapes) ranks.push_back(s.size());
  const EinsumSpec spec = parse_einsum(equation, ranks);
  const std::map<int, int64_t> size = label_sizes(equation, spec, shapes);
  std::vector<int64_t> out;
  for (int l : spec.output) out.push_back(size.at(l));
  return out;
}

std::optional<EinsumContraction> einsum_contraction(
    const std::string& equation, const std::vector<std::vector<int64_t>>& shapes) {
  if (shapes.size() != 2) return std::nullopt;
  const EinsumSpec spec = parse_einsum(equation, {shapes[0].size(), shapes[1].size()});
  const std::vector<int>&a = spec.inputs[0], &b = spec.inputs[1], &out = spec.output;
  auto pos = [](const std::vector<int>& labels, int l) -> int64_t {
    auto it = std::find(labels.begin(), labels.end(), l);
    return it == labels.end() ? -1 : it - labels.begin();
  };
  auto distinct = [](std::vector<int> labels) {
    std::sort(labels.begin(), labels.end());
    return std::adjacent_find(labels.begin(), labels.end()) == labels.end();
  };
  if (!distinct(a) || !distinct(b)) return std::nullopt;
  // Batch, row and column letters in the output's order; contracted ones in A's.
  std::vector<int> batch, rows, cols, summed;
  for (int l : out) {
    const bool in_a = pos(a, l) >= 0, in_b = pos(b, l) >= 0;
    (in_a && in_b ? batch : in_a ? rows : cols).push_back(l);
  }
  for (int l : a) {
    if (pos(out, l) >= 0) continue;
    if (pos(b, l) < 0) return std::nullopt;  // summed over A alone
    summed.push_back(l);
  }
  for (int l : b) {
    if (pos(out, l) < 0 && pos(a, l) < 0) return std::nullopt;  // summed over B alone
  }
  if (summed.empty() || (rows.empty() && cols.empty())) return std::nullopt;
  for (int l : batch) {
    if (shapes[0][pos(a, l)] != shapes[1][pos(b, l)]) return std::nullopt;  // broadcast
  }
  EinsumContraction con;
  auto size = [&](int l) {
    const int64_t i = pos(a, l);
    return i >= 0 ? shapes[0][i] : shapes[1][pos(b, l)];
  };
  for (int l : batch) {
    con.perm_a.push_back(pos(a, l));
    con.perm_b.push_back(pos(b, l));
    con.batch.push_back(size(l));
    con.product_shape.push_back(size(l));
  }
  for (int l : rows) {
    con.perm_a.push_back(pos(a, l));
    con.m *= size(l);
    con.product_shape.push_back(size(l));
  }
  for (int l : summed) {
    con.perm_a.push_back(pos(a, l));
    con.perm_b.push_back(pos(b, l));
    con.k *= size(l);
  }
  for (int l : cols) {
    con.perm_b.push_back(pos(b, l));
    con.n *= size(l);
    con.product_shape.push_back(size(l));
  }
  std::vector<int> product = batch;
  product.insert(product.end(), rows.begin(), rows.end());
  product.insert(product.end(), cols.begin(), cols.end());
  for (int l : out) con.perm_out.push_back(pos(product, l));
  return con;
}

te::Tensor einsum(const std::string& equation, const std::vector<te::Tensor>& xs,
                  const std::string& name) {
  KILN_USER_CHECK(!xs.empty()) << "einsum '" << equation << "' has no operands";
  std::vector<size_t> ranks;
  std::vector<std::vector<int64_t>> shapes;
  for (const te::Tensor& x : xs) {
    KILN_USER_CHECK(x->dtype() == xs[0]->dtype())
        << "einsum '" << equation << "': operands of " << xs[0]->dtype().str() << " and "
        << x->dtype().str();
    ranks.push_back(x.ndim());
    std::vector<int64_t> s;
    for (const ir::Expr& e : x->shape()) {
      auto c = ir::as_const_int(e);
      KILN_USER_CHECK(c) << "einsum '" << equation << "' needs static shapes";
      s.push_back(*c);
    }
    shapes.push_back(std::move(s));
  }
  const EinsumSpec spec = parse_einsum(equation, ranks);
  const std::map<int, int64_t> size = label_sizes(equation, spec, shapes);
  std::vector<ir::Expr> out_shape;
  for (int l : spec.output) out_shape.push_back(ir::Expr(size.at(l)));
  // Summed letters, in order of first appearance.
  std::vector<int> summed;
  for (const auto& labels : spec.inputs) {
    for (int l : labels) {
      if (std::find(spec.output.begin(), spec.output.end(), l) == spec.output.end() &&
          std::find(summed.begin(), summed.end(), l) == summed.end()) {
        summed.push_back(l);
      }
    }
  }
  std::vector<te::IterVar> axes;
  for (int l : summed) axes.push_back(te::reduce_axis({0, size.at(l)}, "k" + std::to_string(l)));
  return te::compute(
      out_shape,
      [&](const std::vector<ir::Var>& i) {
        std::map<int, ir::Expr> at;
        for (size_t d = 0; d < spec.output.size(); ++d) at[spec.output[d]] = i[d];
        for (size_t r = 0; r < summed.size(); ++r) at[summed[r]] = axes[r]->var;
        ir::Expr prod;
        for (size_t k = 0; k < xs.size(); ++k) {
          std::vector<ir::Expr> idx;
          for (size_t d = 0; d < spec.inputs[k].size(); ++d) {
            const int l = spec.inputs[k][d];
            // A broadcast ellipsis axis of size 1 reads its only element.
            idx.push_back(shapes[k][d] == 1 && size.at(l) != 1 ? ir::Expr(0) : at.at(l));
          }
          ir::Expr v = xs[k](idx);
          prod = prod.defined() ? prod * v : v;
        }
        return axes.empty() ? prod : te::sum(prod, axes);
      },
      name);
}

}  // namespace kiln::topi
