// libFuzzer target: the config loader on any bytes: the JSON text up to the first NUL byte, then
// one --set override per NUL-separated piece; then what training reads of it.
#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/train_settings.h"
#include "fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ddgnn;
  const std::string all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  const std::string json = all.substr(0, nul);
  std::vector<std::string> overrides;
  for (size_t at = nul; at != std::string::npos && at < all.size();) {
    const size_t next = all.find('\0', at + 1);
    overrides.push_back(all.substr(at + 1, next == std::string::npos ? next : next - at - 1));
    at = next;
  }
  fuzz::MemFile file(reinterpret_cast<const uint8_t*>(json.data()), json.size());
  fuzz::expect_clean([&] {
    ConfigOptions options;
    options.allow_unimplemented = !overrides.empty() && overrides[0].size() % 2 == 1;
    const Config config = load_config(file.path(), overrides, options);
    config_table(config);
    train_settings(config);
  });
  return 0;
}
