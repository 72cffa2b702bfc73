// The cost model kinds behind cost_model.h's factory.
#include "compiler/autotune/cost_model.h"

#include "base/error.h"
#include "compiler/autotune/mlp_model.h"
#include "compiler/autotune/xgb_model.h"

namespace kiln::autotune {

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
