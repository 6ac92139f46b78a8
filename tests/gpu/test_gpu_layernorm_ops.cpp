// The CUDA LayerNorm family against the CPU's: forward values and saved
// statistics, the parameter and input gradients (accumulating too), rows wider
// and narrower than a warp, a large mean, many rows, and bit-for-bit repeats. Part of
// gpu_tests (skipped with exit 77 where no GPU is usable).
#include <catch2/catch.hpp>
#include <vector>

#include "gpu_support.hpp"
#include "ops/layernorm/layernorm_ops.hpp"

using namespace mpiddp;
using namespace mpiddp::test;

TEST_CASE("GPU layer normalisation matches the CPU's, and repeats bit for bit", "[gpu][layernorm]") {
  struct Case {
    int rows, d;
    float offset;  // a large mean: the centred squares must keep the variance
  };
  // 1000 rows x 300: several chunks of the parameter gradients' rows, the last one short, two blocks of columns.
  for (const Case k : {Case{5, 7, 0.0f}, Case{33, 64, 0.0f}, Case{8, 768, 100.0f}, Case{1, 1, 0.5f},
                       Case{1000, 300, 1.0f}}) {
    LayerNormGeometry g;
    g.rows = k.rows;
    g.d = k.d;
    const std::size_t size = static_cast<std::size_t>(g.rows) * g.d, d = static_cast<std::size_t>(g.d);
    auto x = random_values(size, 700 + k.d, 2.0f);
    for (float& v : x) v += k.offset;
    const auto dy = random_values(size, 800 + k.d);
    const auto weight = random_values(d, 900), bias = random_values(d, 901);
    INFO("rows " << g.rows << " d " << g.d << " offset " << k.offset);
    LayerNormOps& cpu = cpu_device().ops<LayerNormOps>();
    LayerNormOps& dev = gpu().ops<LayerNormOps>();

    std::vector<float> y(size), saved(2 * static_cast<std::size_t>(g.rows));
    cpu.forward(x.data(), y.data(), weight.data(), bias.data(), 1e-5f, saved.data(), g);
    OnGpu gx(x), gdy(dy), gw(weight), gb(bias), gy(size), gsaved(saved.size());
    dev.forward(gx.data, gy.data, gw.data, gb.data, 1e-5f, gsaved.data, g);
    CHECK(close(gy.host(), y, 1e-5, 1e-5));
    CHECK(close(gsaved.host(), saved, 1e-6, 1e-6));

    // Backward from the CPU's saved statistics, so only this call differs.
    std::vector<float> dx(size), dw(d), db(d);
    cpu.backward(x.data(), dy.data(), weight.data(), saved.data(), dx.data(), dw.data(), db.data(), false, g);
    OnGpu gsaved_cpu(saved), gdx(size), gdw(d), gdb(d);
    dev.backward(gx.data, gdy.data, gw.data, gsaved_cpu.data, gdx.data, gdw.data, gdb.data, false, g);
    CHECK(close(gdx.host(), dx, 1e-4, 1e-5));
    CHECK(close(gdw.host(), dw, 1e-5, 1e-5));
    CHECK(close(gdb.host(), db, 1e-5, 1e-5));
    dev.backward(gx.data, gdy.data, gw.data, gsaved_cpu.data, nullptr, gdw.data, gdb.data, true, g);
    std::vector<float> dw2(dw), db2(db);
    for (float& v : dw2) v *= 2.0f;
    for (float& v : db2) v *= 2.0f;
    CHECK(close(gdw.host(), dw2, 1e-5, 1e-5));
    CHECK(close(gdb.host(), db2, 1e-5, 1e-5));

    // Fixed-order sums: the same bits every time.
    const auto first = gy.host();
    dev.forward(gx.data, gy.data, gw.data, gb.data, 1e-5f, gsaved.data, g);
    CHECK(gy.host() == first);
    const auto first_dx = gdx.host();
    dev.backward(gx.data, gdy.data, gw.data, gsaved_cpu.data, gdx.data, gdw.data, gdb.data, false, g);
    const auto first_dw = gdw.host(), first_db = gdb.host();
    dev.backward(gx.data, gdy.data, gw.data, gsaved_cpu.data, gdx.data, gdw.data, gdb.data, false, g);
    CHECK(gdx.host() == first_dx);
    CHECK(gdw.host() == first_dw);
    CHECK(gdb.host() == first_db);
  }
}
