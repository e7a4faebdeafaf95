// `ddgnn config`: checks a run config (schema, then the keys together as `ddgnn train` does
// before it reads data) and prints every resolved value with its source (default,
// file, --set) and the warnings, optionally writing the resolved JSON; or, with --list-keys, prints
// the reference of every key (--markdown: the text of docs/config.md).
#include <algorithm>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "app/commands.h"
#include "config/config.h"
#include "config/config_schema.h"
#include "config/train_settings.h"
#include "core/error.h"

namespace ddgnn {

Command add_config_command(CLI::App& app) {
  struct Options {
    std::string config;
    std::vector<std::string> overrides;
    bool allow_unimplemented = false;
    std::string write;
    bool list_keys = false;
    bool markdown = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "config", "Check a run config and print every value with its source, or list every key");
  sub->add_option("--config,-c", options->config, "the run config (JSON)")->type_name("FILE");
  sub->add_option("--set", options->overrides,
                  "KEY=VALUE override, repeatable (e.g. --set Training.batch_size=32)")
      ->type_name("KEY=VALUE")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  sub->add_flag("--allow-unimplemented", options->allow_unimplemented,
                "HydraGNN keys that ddgnn does not implement become warnings instead of errors");
  sub->add_option("--write", options->write, "write the resolved config (JSON) to this file")
      ->type_name("FILE");
  sub->add_flag("--list-keys", options->list_keys, "print the reference of every config key");
  sub->add_flag("--markdown", options->markdown,
                "with --list-keys: print it as Markdown (the text of docs/config.md)");

  auto run = [options]() -> int {
    if (options->list_keys) {
      if (!options->config.empty() || !options->overrides.empty() || !options->write.empty())
        throw ConfigError("ddgnn config: --list-keys takes no --config, --set or --write",
                          "run `ddgnn config --list-keys` alone");
      std::cout << schema_reference(options->markdown);
      return 0;
    }
    if (options->markdown)
      throw ConfigError("ddgnn config: --markdown goes with --list-keys",
                        "run `ddgnn config --list-keys --markdown`");
    if (options->config.empty())
      throw ConfigError("ddgnn config: no config given",
                        "run `ddgnn config --config run.json`, or `ddgnn config --list-keys`");
    ConfigOptions config_options;
    config_options.allow_unimplemented = options->allow_unimplemented;
    const Config config = load_config(options->config, options->overrides, config_options);
    // The checks `ddgnn train` makes of the keys together before it reads any data (models,
    // schedules, targets), so that a config this command calls valid also starts.
    train_settings(config);
    std::cout << "config " << config.source << ": valid\n\n" << config_table(config);
    for (const auto& warning : config.warnings) std::cout << "warning: " << warning << "\n";
    if (!options->write.empty()) {
      write_resolved_config(config, options->write);
      std::cout << "wrote " << options->write << "\n";
    }
    return 0;
  };
  return Command{sub, run};
}

}  // namespace ddgnn
