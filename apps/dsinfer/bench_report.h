// dsinfer bench's text report, from the JSON it measured (cmd_bench.cpp), and the tables it shares.
#pragma once

#include <nlohmann/json.hpp>

namespace dsinfer::cli {

// The headline rows: batch-1 decode (else the first batch) and the 512-token prefill (else the
// longest).
const nlohmann::json& headline_decode(const nlohmann::json& decodes);
const nlohmann::json& headline_prefill(const nlohmann::json& prefills);

// A table of one forward call's collectives (calls, KB, ms, share of the step) on stdout.
void print_collectives(const char* title, const nlohmann::json& collectives, double step_seconds);
// A table of where one forward call's time went: decode shows GB/s of weights, prefill GFLOP/s.
void print_parts(const char* title, const nlohmann::json& parts, bool decode);
// Everything bench measured (its --json object), as tables on stdout; the last line is
// `decode_bw_fraction=X prefill_flop_fraction=Y`.
void print_bench_report(const nlohmann::json& out);

}  // namespace dsinfer::cli
