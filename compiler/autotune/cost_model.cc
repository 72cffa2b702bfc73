// The cost model kinds behind cost_model.h's factory.
#include "compiler/autotune/cost_model.h"

#include <cmath>

#include "base/error.h"
#include "compiler/autotune/mlp_model.h"
#include "compiler/autotune/xgb_model.h"

namespace kiln::autotune {

void check_training_rows(const std::vector<std::vector<float>>& x,
                         const std::vector<double>& throughput, const std::vector<int>& group,
                         const char* who) {
  KILN_USER_CHECK(!x.empty()) << "cost model " << who
                              << ": no training records (at least one measured config is needed)";
  KILN_USER_CHECK(x.size() == throughput.size())
      << "cost model " << who << ": " << x.size() << " rows but " << throughput.size()
      << " throughputs";
  KILN_USER_CHECK(group.empty() || group.size() == x.size())
      << "cost model " << who << ": " << x.size() << " rows but " << group.size() << " group ids";
  KILN_USER_CHECK(!x[0].empty()) << "cost model " << who << ": rows have no features";
  for (size_t i = 0; i < throughput.size(); ++i)
    KILN_USER_CHECK(std::isfinite(throughput[i]))
        << "cost model " << who << ": throughput of row " << i << " is not finite";
}

std::unique_ptr<CostModel> make_cost_model(std::string_view kind) {
  if (kind == "xgb") return std::make_unique<XgbModel>();
  if (kind == "mlp") return std::make_unique<MlpModel>();
  throw Error("unknown cost model '" + std::string(kind) + "' (known: xgb, mlp)");
}

std::unique_ptr<CostModel> load_cost_model(std::string_view kind, const std::string& bytes) {
  if (kind == "xgb") return std::make_unique<XgbModel>(XgbModel::load(bytes));
  if (kind == "mlp") return std::make_unique<MlpModel>(MlpModel::load(bytes));
  throw Error("unknown cost model '" + std::string(kind) + "' (known: xgb, mlp)");
}

}  // namespace kiln::autotune
