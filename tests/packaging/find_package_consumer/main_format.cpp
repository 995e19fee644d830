// Built only when the consumer asked for COMPONENTS format: disttrain::format
// must bring fmt, and the host-only formatters must work.
#include <disttrain/core/format.hpp>

#include <cstdio>
#include <string>

#include <fmt/format.h>

int main() {
  const std::string s = fmt::format("{}", disttrain::errc::timeout);
  if (s != "timeout") {
    std::fprintf(stderr, "FAILED: fmt formatter of errc::timeout gave '%s'\n", s.c_str());
    return 1;
  }
  std::printf("disttrain format consumer: OK\n");
  return 0;
}
