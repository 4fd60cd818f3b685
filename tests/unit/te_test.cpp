// The tensor-expression DSL: definitions from the seed tutorial and GEMM, and user mistakes.
#include "compiler/tessel.h"
#include "TestUtil.h"

#include <gtest/gtest.h>

using namespace tessel;

using tessel::test::expect_error;

TEST(TE, GemmDefinitionPrints) {
  const int M = 64, N = 32, K = 16;
  Tensor A = placeholder({M, K}, Float(16), "A");
  Tensor B = placeholder({K, N}, Float(16), "B");
  IterVar k = reduce_axis({0, K}, "k");
  Tensor C = compute(
      {M, N},
      [&](Var i, Var j) { return sum(A(i, k).astype(Float(32)) * B(k, j).astype(Float(32)), {k}); },
      "C", {"i", "j"});
  EXPECT_EQ(to_string(A), "placeholder A[64, 16] float16");
  EXPECT_EQ(to_string(C), "compute C[i: 64, j: 32] float32 = sum(cast(float32, A[i, k]) * "
                          "cast(float32, B[k, j]), axis=[k: [0, 16)])");
  EXPECT_EQ(C.dtype(), Float(32));
  auto order = topological_order({C});
  ASSERT_EQ(order.size(), 3u);
  EXPECT_EQ(order.back().name(), "C");
}

TEST(TE, SeedConvDefinitionPrints) {
  const int batch = 256, height = 14, width = 14, in_ch = 256, out_ch = 512, k = 3, pad = 1,
            blk = 16;
  Tensor A = placeholder({batch / blk, height, width, in_ch / blk, blk, blk}, Float(16), "A");
  Tensor W = placeholder({k, k, in_ch / blk, out_ch / blk, blk, blk}, Float(16), "W");
  Tensor Apad = compute(
      {batch / blk, height + 2 * pad, width + 2 * pad, in_ch / blk, blk, blk},
      [&](Var n, Var h, Var w, Var i, Var nn, Var ii) {
        return if_then_else(all(h >= pad, h - pad < height, w >= pad, w - pad < width),
                            A(n, h - pad, w - pad, i, nn, ii), make_const(Float(16), 0));
      },
      "Apad", {"n", "h", "w", "i", "nn", "ii"});
  IterVar kh = reduce_axis({0, k}, "kh"), kw = reduce_axis({0, k}, "kw");
  IterVar ic = reduce_axis({0, in_ch / blk}, "ic"), ii = reduce_axis({0, blk}, "ii");
  Tensor Conv = compute(
      {batch / blk, height, width, out_ch / blk, blk, blk},
      [&](Var n, Var h, Var w, Var o, Var nn, Var oo) {
        return sum(Apad(n, h + kh, w + kw, ic, nn, ii).astype(Float(32)) *
                       W(kh, kw, ic, o, ii, oo).astype(Float(32)),
                   {ic, kh, kw, ii});
      },
      "Conv", {"n", "h", "w", "o", "nn", "oo"});
  EXPECT_EQ(to_string(Apad),
            "compute Apad[n: 16, h: 16, w: 16, i: 16, nn: 16, ii: 16] float16 = "
            "if_then_else(h >= 1 && h - 1 < 14 && w >= 1 && w - 1 < 14, "
            "A[n, h - 1, w - 1, i, nn, ii], 0f16)");
  EXPECT_EQ(to_string(Conv),
            "compute Conv[n: 16, h: 14, w: 14, o: 32, nn: 16, oo: 16] float32 = "
            "sum(cast(float32, Apad[n, h + kh, w + kw, ic, nn, ii]) * "
            "cast(float32, W[kh, kw, ic, o, ii, oo]), "
            "axis=[ic: [0, 16), kh: [0, 3), kw: [0, 3), ii: [0, 16)])");
  auto order = topological_order({Conv});
  ASSERT_EQ(order.size(), 4u);
  EXPECT_EQ(order[0].name(), "A");
  EXPECT_EQ(order[1].name(), "Apad");
  EXPECT_EQ(order[2].name(), "W");
}

TEST(TE, Int64ExtentsBecomeInt32) {
  const int64_t n = 1024;
  Tensor A = placeholder({Expr(n), Expr(n)}, Float(32), "A");
  Tensor B = compute({Expr(n)}, [&](Var i) { return A(i, i); }, "B");
  EXPECT_EQ(to_string(A), "placeholder A[1024, 1024] float32");
  EXPECT_EQ(A.shape()[0].type(), Int(32));
  EXPECT_EQ(B.shape()[0].type(), Int(32));
}

TEST(TE, MaxMinReductionsAndDefaultAxisNames) {
  Tensor X = placeholder({8, 4}, Float(32), "X");
  IterVar r = reduce_axis({0, 4}, "r");
  Tensor Mx = compute({8}, [&](Var i) { return max(X(i, r), {r}); }, "Mx");
  Tensor Mn = compute({8}, [&](Var i) { return min(X(i, r), {r}, X(i, r) > 0.0f); }, "Mn");
  EXPECT_EQ(to_string(Mx), "compute Mx[i0: 8] float32 = max(X[i0, r], axis=[r: [0, 4)])");
  EXPECT_EQ(to_string(Mn),
            "compute Mn[i0: 8] float32 = min(X[i0, r], axis=[r: [0, 4)], where=X[i0, r] > 0f32)");
}

TEST(TE, ElementwiseWithLiteralsTakesOperandType) {
  Tensor X = placeholder({4}, Float(16), "X");
  Tensor Y = compute({4}, [&](Var i) { return X(i) * 2 + 0.5; }, "Y");
  EXPECT_EQ(Y.dtype(), Float(16));
  EXPECT_EQ(to_string(Y), "compute Y[i0: 4] float16 = X[i0] * 2f16 + 0.5f16");
}

TEST(TEErrors, WrongIndexArity) {
  Tensor A = placeholder({4, 4}, Float(32), "A");
  expect_error([&] { (void)A(Var("i")); },
               {"tensor 'A' has 2 dimensions but was indexed with 1 index"});
  expect_error([&] { (void)A(1, 2, 3); }, {"'A'", "3 indices"});
}

TEST(TEErrors, MismatchedTypesNeedACast) {
  Tensor A = placeholder({4}, Float(16), "A");
  Tensor B = placeholder({4}, Float(32), "B");
  expect_error([&] { compute({4}, [&](Var i) { return A(i) * B(i); }, "C"); },
               {"different types", "float16", "float32", "astype"});
  expect_error([&] { compute({4}, [&](Var i) { return A(i) + i; }, "C"); },
               {"float16", "int32"});
}

TEST(TEErrors, BadExtents) {
  expect_error([] { placeholder({4, 0}, Float(32), "Z"); },
               {"tensor 'Z'", "dimension 1", "must be positive, got 0"});
  expect_error([] { placeholder({-3}, Float(32), "N"); }, {"'N'", "positive, got -3"});
  expect_error([] { compute({0}, [](Var i) { return cast(Float(32), i); }, "E"); },
               {"'E'", "positive"});
  expect_error([] { reduce_axis({4, 4}, "k"); }, {"axis 'k'", "empty"});
  expect_error([] { placeholder({Var("n")}, Float(32), "S"); }, {"'S'", "constant"});
  expect_error([] { placeholder({Expr(int64_t(1) << 31)}, Float(32), "L"); },
               {"'L'", "2147483648", "32-bit"});
}

TEST(TEErrors, ShapeAndLambdaDisagree) {
  expect_error([] { compute({4, 4}, [](Var i) { return cast(Float(32), i); }, "C"); },
               {"tensor 'C'", "2 dimensions", "takes 1 indices"});
}

TEST(TEErrors, ReduceAxisOutsideReduction) {
  Tensor A = placeholder({4, 4}, Float(32), "A");
  IterVar k = reduce_axis({0, 4}, "k");
  expect_error([&] { compute({4}, [&](Var i) { return A(i, k); }, "C"); },
               {"tensor 'C'", "uses 'k'", "sum/max/min"});
  expect_error([&] { compute({4}, [&](Var i) { return sum(A(i, k), {k}) * 2.0f; }, "D"); },
               {"tensor 'D'", "whole body"});
}

TEST(TEErrors, UnknownTypeName) {
  expect_error([] { DataType::parse("flaot16"); }, {"unknown data type 'flaot16'"});
  EXPECT_EQ(DataType::parse("float16x8"), Float(16, 8));
  EXPECT_EQ(DataType::parse("bool"), Bool());
  // Digits past an int were "internal error: stoi" (std::out_of_range); they are no type.
  expect_error([] { DataType::parse("float99999999999"); },
               {"unknown data type 'float99999999999'", "float16/32/64"});
  expect_error([] { DataType::parse("float16x99999999999999"); },
               {"unknown data type 'float16x99999999999999'"});
  expect_error([] { DataType::parse("float16x0"); }, {"unknown data type 'float16x0'"});
  expect_error([] { DataType::parse("int"); }, {"unknown data type 'int'"});
  EXPECT_EQ(DataType::parse("uint8x4"), UInt(8, 4));
  EXPECT_EQ(DataType::parse("bfloat16"), BFloat(16));
}
