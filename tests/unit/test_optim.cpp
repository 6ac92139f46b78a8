// Optimizer updates against values computed by hand from PyTorch's formulas.
#include <catch2/catch.hpp>
#include <cmath>

#include "mpiddp/optim/optimizer.hpp"

using namespace mpiddp;

TEST_CASE("SGD with momentum, weight decay and Nesterov", "[optim]") {
  float p[] = {1.0f, -2.0f};
  const float g[] = {0.5f, 0.25f};
  SECTION("plain") {
    Sgd sgd(cpu_device(), 0.0, false, 0.0);
    sgd.step(p, g, 2, 0.1);
    CHECK(p[0] == Approx(0.95f));
    CHECK(p[1] == Approx(-2.025f));
  }
  SECTION("momentum: buffer starts at the first gradient") {
    Sgd sgd(cpu_device(), 0.9, false, 0.0);
    sgd.step(p, g, 2, 0.1);  // buf = g
    CHECK(p[0] == Approx(1.0 - 0.1 * 0.5));
    sgd.step(p, g, 2, 0.1);  // buf = 0.9 * 0.5 + 0.5 = 0.95
    CHECK(p[0] == Approx(0.95 - 0.1 * 0.95));
  }
  SECTION("nesterov and weight decay") {
    Sgd sgd(cpu_device(), 0.9, true, 0.01);
    sgd.step(p, g, 2, 0.1);  // d = 0.5 + 0.01; buf = d; update d + 0.9 buf
    const double d = 0.5 + 0.01 * 1.0;
    CHECK(p[0] == Approx(1.0 - 0.1 * (d + 0.9 * d)));
  }
}

TEST_CASE("AdamW follows torch.optim.AdamW", "[optim]") {
  float p[] = {1.0f};
  const float g1[] = {0.5f}, g2[] = {-0.25f};
  AdamW adam(cpu_device(), 0.9, 0.999, 1e-8, 0.1);
  const double lr = 0.01;
  adam.step(p, g1, 1, lr);
  double m = 0.1 * 0.5, v = 0.001 * 0.25, ref = 1.0 * (1 - lr * 0.1);
  ref -= lr / (1 - 0.9) * m / (std::sqrt(v) / std::sqrt(1 - 0.999) + 1e-8);
  CHECK(p[0] == Approx(ref).epsilon(1e-6));
  adam.step(p, g2, 1, lr);
  m = 0.9 * m + 0.1 * -0.25;
  v = 0.999 * v + 0.001 * 0.0625;
  ref *= (1 - lr * 0.1);
  ref -= lr / (1 - 0.81) * m / (std::sqrt(v) / std::sqrt(1 - 0.999 * 0.999) + 1e-8);
  CHECK(p[0] == Approx(ref).epsilon(1e-6));
  CHECK(adam.steps_taken() == 2);
}

TEST_CASE("learning-rate schedules", "[optim]") {
  OptimConfig c;
  c.lr = 1.0;
  SECTION("constant") {
    LrSchedule s(c, 10, 100);
    CHECK(s.at(0) == 1.0);
    CHECK(s.at(99) == 1.0);
  }
  SECTION("step decays every step_epochs") {
    c.schedule = ScheduleKind::step;
    c.step_epochs = 2;
    c.gamma = 0.5;
    LrSchedule s(c, 10, 100);
    CHECK(s.at(19) == 1.0);
    CHECK(s.at(20) == 0.5);
    CHECK(s.at(45) == 0.25);
  }
  SECTION("warm-up then cosine to min_lr") {
    c.schedule = ScheduleKind::cosine;
    c.warmup_steps = 10;
    c.min_lr = 0.1;
    LrSchedule s(c, 10, 110);
    CHECK(s.at(0) == Approx(0.1));
    CHECK(s.at(9) == Approx(1.0));
    CHECK(s.at(10) == Approx(1.0));
    CHECK(s.at(60) == Approx(0.55));
    CHECK(s.at(110) == Approx(0.1));
  }
}
