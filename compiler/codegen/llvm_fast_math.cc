// Vector-friendly float32 math: exp, log and tanh as polynomials after range reduction (the
// Cephes single-precision approximations, about 1 ulp), and erf as a rational function (below),
// built from plain arithmetic so that LLVM keeps them in vector registers. LLVM's own llvm.exp /
// llvm.log on a vector become one libm call per lane, which made every exp in a softmax or sigmoid
// a scalar call.
//
// Edge cases: exp saturates to +inf above 88.72 and to 0 below -87.33 (where float32 turns
// denormal); log gives -inf at 0, NaN below 0 and +inf at +inf; NaN inputs give NaN.
#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Intrinsics.h>

#include <limits>

#include "compiler/codegen/codegen_llvm_impl.h"

namespace kiln::codegen::detail {
namespace {

/// The integer type with the same shape as float type `t` (i32 or <N x i32>).
llvm::Type* int_like(llvm::Type* t, llvm::IRBuilder<>& b) {
  if (auto* vt = llvm::dyn_cast<llvm::VectorType>(t)) {
    return llvm::VectorType::get(b.getInt32Ty(), vt->getElementCount());
  }
  return b.getInt32Ty();
}

/// Evaluates the polynomial c[0]*x^(n-1) + ... + c[n-1] by Horner's rule.
llvm::Value* horner(llvm::IRBuilder<>& b, llvm::Value* x, std::initializer_list<double> coeffs) {
  llvm::Type* t = x->getType();
  llvm::Value* acc = nullptr;
  for (double c : coeffs) {
    llvm::Value* k = llvm::ConstantFP::get(t, c);
    acc = acc == nullptr ? k : b.CreateIntrinsic(llvm::Intrinsic::fma, {t}, {acc, x, k});
  }
  return acc;
}

}  // namespace

bool CodeGenLLVM::has_fast_math(llvm::Type* t) const { return t->getScalarType()->isFloatTy(); }

llvm::Value* CodeGenLLVM::fast_exp(llvm::Value* x) {
  auto& b = builder_;
  llvm::Type* t = x->getType();
  auto c = [&](double v) { return llvm::ConstantFP::get(t, v); };
  llvm::Value* xc = b.CreateMinNum(b.CreateMaxNum(x, c(-87.3365447505531)), c(88.7228391116729));
  // x = n*ln2 + r, |r| <= ln2/2; ln2 split in two parts for an exact product.
  llvm::Value* n = b.CreateUnaryIntrinsic(
      llvm::Intrinsic::floor, b.CreateFAdd(b.CreateFMul(xc, c(1.44269504088896341)), c(0.5)));
  llvm::Value* r = b.CreateFSub(xc, b.CreateFMul(n, c(0.693359375)));
  r = b.CreateFSub(r, b.CreateFMul(n, c(-2.12194440e-4)));
  llvm::Value* p = horner(b, r,
                          {1.9875691500E-4, 1.3981999507E-3, 8.3334519073E-3, 4.1665795894E-2,
                           1.6666665459E-1, 5.0000001201E-1});
  llvm::Value* y = b.CreateFAdd(b.CreateFAdd(b.CreateFMul(p, b.CreateFMul(r, r)), r), c(1.0));
  // 2^n as 2 * 2^(n-1), so that n = 128 (x near the top) still has a finite exponent field.
  llvm::Type* it = int_like(t, b);
  llvm::Value* ni = b.CreateFPToSI(n, it);
  llvm::Value* bits = b.CreateShl(b.CreateAdd(ni, llvm::ConstantInt::get(it, 126)), 23);
  llvm::Value* scaled = b.CreateFMul(b.CreateFMul(y, c(2.0)), b.CreateBitCast(bits, t));
  // Above the range: +inf; NaN stays NaN (the clamp above would have turned it into a number).
  scaled = b.CreateSelect(b.CreateFCmpOGT(x, c(88.7228391116729)),
                          c(std::numeric_limits<double>::infinity()), scaled);
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, scaled);
}

llvm::Value* CodeGenLLVM::fast_log(llvm::Value* x) {
  auto& b = builder_;
  llvm::Type* t = x->getType();
  llvm::Type* it = int_like(t, b);
  auto c = [&](double v) { return llvm::ConstantFP::get(t, v); };
  auto ci = [&](int64_t v) { return llvm::ConstantInt::get(it, v); };
  // x = m * 2^e with m in [0.5, 1).
  llvm::Value* bits = b.CreateBitCast(x, it);
  llvm::Value* e = b.CreateSub(b.CreateAnd(b.CreateLShr(bits, 23), ci(0xff)), ci(126));
  llvm::Value* m =
      b.CreateBitCast(b.CreateOr(b.CreateAnd(bits, ci(0x807fffff)), ci(0x3f000000)), t);
  llvm::Value* ef = b.CreateSIToFP(e, t);
  // Fold m into [sqrt(1/2), sqrt(2)) around 1.
  llvm::Value* small = b.CreateFCmpOLT(m, c(0.707106781186547524));
  ef = b.CreateSelect(small, b.CreateFSub(ef, c(1.0)), ef);
  llvm::Value* f =
      b.CreateSelect(small, b.CreateFSub(b.CreateFAdd(m, m), c(1.0)), b.CreateFSub(m, c(1.0)));
  llvm::Value* z = b.CreateFMul(f, f);
  llvm::Value* p =
      horner(b, f,
             {7.0376836292E-2, -1.1514610310E-1, 1.1676998740E-1, -1.2420140846E-1, 1.4249322787E-1,
              -1.6668057665E-1, 2.0000714765E-1, -2.4999993993E-1, 3.3333331174E-1});
  llvm::Value* y = b.CreateFMul(b.CreateFMul(p, f), z);
  y = b.CreateFAdd(y, b.CreateFMul(ef, c(-2.12194440e-4)));
  y = b.CreateFSub(y, b.CreateFMul(z, c(0.5)));
  llvm::Value* r = b.CreateFAdd(b.CreateFAdd(f, y), b.CreateFMul(ef, c(0.693359375)));
  // Special values: log(0) = -inf, log(<0) = NaN, log(+inf) = +inf, log(NaN) = NaN.
  const double inf = std::numeric_limits<double>::infinity();
  r = b.CreateSelect(b.CreateFCmpOEQ(x, c(inf)), c(inf), r);
  r = b.CreateSelect(b.CreateFCmpOEQ(x, c(0.0)), c(-inf), r);
  return b.CreateSelect(b.CreateFCmpULT(x, c(0.0)), c(std::numeric_limits<double>::quiet_NaN()), r);
}

llvm::Value* CodeGenLLVM::fast_tanh(llvm::Value* x) {
  auto& b = builder_;
  llvm::Type* t = x->getType();
  auto c = [&](double v) { return llvm::ConstantFP::get(t, v); };
  llvm::Value* ax = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
  // Small |x|: an odd polynomial.
  llvm::Value* z = b.CreateFMul(x, x);
  llvm::Value* p = horner(b, z,
                          {-5.70498872745E-3, 2.06390887954E-2, -5.37397155531E-2, 1.33314422036E-1,
                           -3.33332819422E-1});
  llvm::Value* small = b.CreateFAdd(b.CreateFMul(b.CreateFMul(p, z), x), x);
  // Large |x|: 1 - 2 / (exp(2|x|) + 1), with the sign of x.
  llvm::Value* e = fast_exp(b.CreateFMul(ax, c(2.0)));
  llvm::Value* large = b.CreateFSub(c(1.0), b.CreateFDiv(c(2.0), b.CreateFAdd(e, c(1.0))));
  large = b.CreateIntrinsic(llvm::Intrinsic::copysign, {t}, {large, x});
  return b.CreateSelect(b.CreateFCmpOLT(ax, c(0.625)), small, large);
}

llvm::Value* CodeGenLLVM::fast_erf(llvm::Value* x) {
  // The rational approximation of Eigen's and XLA's float32 erf: an odd polynomial of degree 13
  // over an even one of degree 8 on x clamped to [-4, 4] (beyond it erf is +-1 in float32).
  // Within 4.5e-7 of erf everywhere (a GELU's erf, which libm computed one lane at a time).
  auto& b = builder_;
  llvm::Type* t = x->getType();
  auto c = [&](double v) { return llvm::ConstantFP::get(t, v); };
  llvm::Value* xc =
      b.CreateBinaryIntrinsic(llvm::Intrinsic::maxnum,
                              b.CreateBinaryIntrinsic(llvm::Intrinsic::minnum, x, c(4.0)), c(-4.0));
  llvm::Value* x2 = b.CreateFMul(xc, xc);
  llvm::Value* p = horner(
      b, x2,
      {-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
       -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02});
  llvm::Value* q = horner(b, x2,
                          {-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
                           -7.37332916720468e-03, -1.42647390514189e-02});
  llvm::Value* r = b.CreateFDiv(b.CreateFMul(xc, p), q);
  // minnum/maxnum drop a NaN; erf(NaN) is NaN.
  return b.CreateSelect(b.CreateFCmpUNO(x, x), x, r);
}

}  // namespace kiln::codegen::detail
