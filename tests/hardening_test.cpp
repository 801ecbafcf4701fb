// Bad input at the command line, as a careless or hostile user gives it (issue 14): each case is
// one "error:" line naming the culprit and exit status 1, within seconds and bounded memory; never
// a crash, a hang or a silently wrong result. The in-process pieces have their own unit tests
// (write_file_test, mapped_file_test, read_file_test, config_test, tokenizer_test).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "io/safetensors.h"
#include "test_support.h"

namespace dsinfer::hardening_test {
namespace {

namespace fs = std::filesystem;
using test::data_path;
using test::run_command;
using test::run_dsinfer;
using test::scratch_dir;
using test::write_file;

const std::string kBin = DSINFER_BIN;

// tiny-v3-chat (the V3 vocabulary) at mp1 with the V3 tokenizer, converted once for the
// read-only cases
const std::string& tiny_ckpt() {
  static const std::string ckpt = test::convert_golden("tiny-v3-chat", 1, /*with_tokenizer=*/true);
  return ckpt;
}

void expect_error(const test::CommandResult& r, const std::string& message,
                  double max_seconds = 20) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_CONTAINS(r.err, "error: " + message);
  EXPECT_LT(r.seconds, max_seconds);
}

// ---- the kernels' tuning overrides (kernels/linear.h): a bad value is one error, not an abort

TEST(Hardening, ABadGemvTuningVariableIsOneClearError) {
  const std::string prompts = scratch_dir("gemv-env") + "/prompts.txt";
  write_file(prompts, "hello\n");
  for (const auto& [setting, message] :
       {std::pair<std::string, std::string>{
            "DSINFER_GEMV_ROWS=3", "DSINFER_GEMV_ROWS=3 is not a power of two from 1 to 16"},
        {"DSINFER_GEMV_PREFETCH=far",
         "DSINFER_GEMV_PREFETCH=far is not one of none, ahead, wrapped"},
        {"DSINFER_GEMV_FP8_SUBNORMAL=9",
         "DSINFER_GEMV_FP8_SUBNORMAL=9 is not a number of tokens from 0 to 4"},
        {"DSINFER_GEMV_MAX_TOKENS=-1", "DSINFER_GEMV_MAX_TOKENS=-1 is not a number of tokens"},
        {"DSINFER_GEMV_ROWS_FP8=6", "DSINFER_GEMV_ROWS_FP8=6 is not a power of two from 1 to 16"},
        {"DSINFER_GEMV_ROWS_MANY=8", "DSINFER_GEMV_ROWS_MANY=8 is not 4 or 6"},
        {"DSINFER_GEMV_SINGLE_PLAIN=yes", "DSINFER_GEMV_SINGLE_PLAIN=yes is not 0 or 1"}}) {
    SCOPED_TRACE(setting);
    expect_error(run_command(setting + " " + kBin + " generate --ckpt-path " + tiny_ckpt() +
                             " --input-file " + prompts + " --max-new-tokens 2"),
                 message);
  }
}

// ---- results on stdout are checked like any output file (they were lost with exit 0)

TEST(Hardening, BatchResultsOnAFullStdoutAreAnError) {
  const std::string prompts = scratch_dir("full-stdout") + "/prompts.txt";
  write_file(prompts, "hello\n");
  expect_error(run_command("sh -c '" + kBin + " generate --ckpt-path " + tiny_ckpt() +
                           " --input-file " + prompts + " --max-new-tokens 3 >/dev/full'"),
               "cannot write the results to stdout: No space left on device");
}

TEST(Hardening, OtherSubcommandsOnAFullStdoutToo) {
  expect_error(run_command("sh -c '" + kBin + " tokenize --tokenizer-path " + tiny_ckpt() +
                           " --text hello >/dev/full'"),
               "cannot write the results to stdout: No space left on device");
  // the chat ends at the next line when its answers cannot be written
  expect_error(run_command("sh -c '" + kBin + " generate --ckpt-path " + tiny_ckpt() +
                               " --interactive --max-new-tokens 3 >/dev/full'",
                           "hello\nagain\nand again\n"),
               "cannot write the results to stdout: No space left on device");
}

// ---- inputs without end (they grew until memory ran out)

TEST(Hardening, AnEndlessChatLineIsAnError) {
  expect_error(run_dsinfer("generate --ckpt-path " + tiny_ckpt() + " --interactive",
                           std::string(3 << 20, 'a')),
               "an input line on stdin is longer than 1048576 bytes");
  expect_error(run_command("sh -c '" + kBin + " generate --ckpt-path " + tiny_ckpt() +
                           " --interactive </dev/zero'"),
               "an input line on stdin is longer than 1048576 bytes");
}

// stdin that cannot be read (PROBE-3 U8) was taken as the end of the input, exit 0
TEST(Hardening, AnUnreadableStdinIsAnErrorNotTheEndOfTheChat) {
  expect_error(run_command("sh -c '" + kBin + " generate --ckpt-path " + tiny_ckpt() +
                           " --interactive < /'"),
               "cannot read stdin: Is a directory");
}

TEST(Hardening, PerplexityOfAnEndlessFileIsAnError) {
  expect_error(run_dsinfer("perplexity --ckpt-path " + tiny_ckpt() + " --input-file /dev/zero"),
               "--input-file /dev/zero is not a regular file or a pipe (a device)");
  expect_error(
      run_dsinfer("perplexity --ckpt-path " + tiny_ckpt() + " --input-file " + tiny_ckpt()),
      "--input-file " + tiny_ckpt() + " is a directory, not a file");
}

// tokenize read its --input-file with a plain ifstream: /dev/zero grew without end, a FIFO nobody
// writes blocked in open
TEST(Hardening, TokenizeInputFileIsReadAsGeneratesIs) {
  const std::string tok = test::data_path("tokenizer/deepseek-v3");
  expect_error(run_dsinfer("tokenize --tokenizer-path " + tok + " --input-file /dev/zero"),
               "--input-file /dev/zero is not a regular file or a pipe (a device)");
  const std::string dir = scratch_dir("tokenize-input");
  expect_error(run_dsinfer("tokenize --tokenizer-path " + tok + " --input-file " + dir),
               "--input-file " + dir + " is a directory, not a file");
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto r = run_dsinfer("tokenize --tokenizer-path " + tok + " --input-file " +
                       fifo);  // no writer: no lines
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  // where nothing is an error, the message says why there was nothing (PROBE-3 U7)
  expect_error(run_dsinfer("generate --ckpt-path " + tiny_ckpt() + " --input-file " + fifo),
               fifo + " holds no prompts (a named pipe that gave no data: nothing was writing");
  expect_error(run_dsinfer("perplexity --ckpt-path " + tiny_ckpt() + " --input-file " + fifo),
               fifo + ": fewer than 2 tokens to score (a named pipe that gave no data");
}

// ---- a prompt over the template's 1 MiB output limit is blamed on its length (it was "chat
// template 3:204: string of ... bytes exceeds the limit")

TEST(Hardening, APromptTooLongIsNamedAsSuch) {
  const std::string prompts = scratch_dir("long-prompt") + "/prompts.txt";
  write_file(prompts, std::string(1200000, 'a') + "\n");
  expect_error(run_dsinfer("generate --ckpt-path " + tiny_ckpt() + " --input-file " + prompts),
               "the prompt is too long: its messages hold 1200004 bytes of text");  // + "user"
  // in a chat, with the system message: the turn fails, the chat goes on
  const auto r =
      run_dsinfer("generate --ckpt-path " + tiny_ckpt() +
                      " --interactive --max-new-tokens 2 --system " + std::string(2000, 's'),
                  std::string(1047000, 'b') + "\nhello\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.err, "error: the prompt is too long: its messages hold 1049010 bytes of text");
  EXPECT_CONTAINS(r.err, "completion tokens");  // the next turn was answered
}

// ---- numbers the math cannot take (nan gave an empty completion, exit 0)

TEST(Hardening, SamplingNumbersOutOfRangeAreErrors) {
  const std::string prompts = scratch_dir("numbers") + "/prompts.txt";
  write_file(prompts, "hello\n");
  const std::string generate = "generate --ckpt-path " + tiny_ckpt() + " --input-file " + prompts;
  for (const char* t : {"nan", "inf", "-1"}) {
    SCOPED_TRACE(t);
    expect_error(run_dsinfer(generate + " --temperature " + t),
                 "temperature must be a finite number >= 0");
  }
  // the largest int is a budget, not an overflow (UBSan watches this in the sanitizer suite); the
  // trained story model ends its answer with EOS after a few dozen tokens
  const std::string story = test::convert_golden("tiny-v3-story", 1, /*with_tokenizer=*/true);
  const auto r = run_dsinfer("generate --ckpt-path " + story + " --input-file " + prompts +
                             " --max-new-tokens 2147483647 --temperature 0");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "Completion: ");
  const auto over = run_dsinfer(generate + " --max-new-tokens 2147483648");
  EXPECT_EQ(over.exit_code, 1);
  EXPECT_CONTAINS(over.err, "--max-new-tokens");
}

// ---- the second probe's findings (issue 35)

// perplexity of no sequence printed a null perplexity and exited 0
TEST(Hardening, PerplexityOfNothingIsAnError) {
  const std::string dir = scratch_dir("ppl-empty");
  write_file(dir + "/case.json", R"({"tokens": []})");
  expect_error(
      run_dsinfer("perplexity --ckpt-path " + tiny_ckpt() + " --case " + dir + "/case.json"),
      dir + "/case.json: no sequences to score");
}

// perplexity held every position's logits at once (tokens x vocab floats: 3000 tokens of the V3
// vocabulary are 1.5 GB); scored in steps, it fits in far less (the address space is capped at
// 1 GiB here). Under AddressSanitizer no cap fits its shadow memory.
TEST(Hardening, PerplexityMemoryDoesNotGrowWithTheText) {
  SKIP_UNDER_ASAN();
  const std::string dir = scratch_dir("ppl-long");
  std::string tokens = "[5";
  for (int i = 1; i < 3000; ++i) tokens += ",5";
  write_file(dir + "/case.json", R"({"tokens": [)" + tokens + "]]}");
  const auto r =
      run_command("prlimit --as=1073741824 " + kBin + " --threads 1 perplexity --ckpt-path " +
                  tiny_ckpt() + " --case " + dir + "/case.json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "perplexity ");
}

// The batch echo printed prompts with printf's %s, which stops at a NUL byte
TEST(Hardening, ThePromptEchoIsTheWholePrompt) {
  const std::string prompts = scratch_dir("nul-prompt") + "/prompts.txt";
  write_file(prompts, std::string("hel\0lo\n", 7));
  const auto r = run_dsinfer("generate --ckpt-path " + tiny_ckpt() + " --input-file " + prompts +
                             " --max-new-tokens 2");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, std::string("Prompt: hel\0lo\nCompletion: ", 24));
}

// The thread pool's constructor unwound past the workers it had started when the system refused
// one, and waited for ever on the condition variable it destroyed under them
TEST(Hardening, ThreadsTheSystemRefusesAreAnError) {
  SKIP_UNDER_ASAN();
  const std::string prompts = scratch_dir("threads") + "/prompts.txt";
  write_file(prompts, "hello\n");
  const auto r =
      run_command("prlimit --as=314572800 " + kBin + " --threads 64 generate --ckpt-path " +
                  tiny_ckpt() + " --input-file " + prompts + " --max-new-tokens 2");
  expect_error(r, "cannot start 64 threads: the system refused the thread after ");
}

// CLI11's own messages had no `error:` prefix, and an unknown command said "A subcommand is
// required"; an empty --api-key turned authentication off without a word; a huge
// --kv-cache-tokens overflowed to a negative budget
TEST(Hardening, CommandLineMistakesAreErrorLines) {
  expect_error(run_dsinfer("frobnicate"),
               "The following argument was not expected: frobnicate "
               "(not a command; the commands: convert, ");
  expect_error(run_dsinfer(""), "no command given; the commands: convert, ");
  expect_error(run_dsinfer("generate --ckpt-path " + tiny_ckpt() + " --no-such-flag"),
               "The following argument was not expected: --no-such-flag\nRun with --help");
  expect_error(run_dsinfer("serve --ckpt-path " + tiny_ckpt() + " --api-key ''"),
               "--api-key is empty");
  // --fast is --act-dtype bf16: beside another --act-dtype it silently won
  expect_error(run_dsinfer("--fast --act-dtype int8 generate --ckpt-path " + tiny_ckpt()),
               "--act-dtype excludes --fast");
  for (const char* budget : {"9223372036854775807", "-1"})
    expect_error(run_dsinfer("serve --ckpt-path " + tiny_ckpt() + " --kv-cache-tokens " + budget),
                 "--kv-cache-tokens must be in [0, ");
}

// serve --api-key-file on a FIFO blocked in open() for ever, SIGTERM already blocked; /dev/zero
// was read until memory ran out
TEST(Hardening, AnApiKeyFileThatIsNoFileIsAnError) {
  const std::string fifo = scratch_dir("key-fifo") + "/key";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string("/dev/zero")})
    expect_error(run_dsinfer("serve --ckpt-path " + tiny_ckpt() + " --api-key-file " + path),
                 "--api-key-file " + path + " is not a regular file");
}

// eval --case (and perplexity --case) on a FIFO nobody writes blocked in open() for ever
TEST(Hardening, ACaseFileThatIsNoFileIsAnError) {
  const std::string dir = scratch_dir("case-fifo");
  const std::string fifo = dir + "/case.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  expect_error(
      run_dsinfer("eval --ckpt-path " + tiny_ckpt() + " --case " + fifo + " --out " + dir + "/out"),
      "case file " + fifo + " is not a regular file (a pipe)");
  expect_error(run_dsinfer("perplexity --ckpt-path " + tiny_ckpt() + " --case " + fifo),
               "case file " + fifo + " is not a regular file (a pipe)");
}

// MASTER_PORT=0 listened on a port nobody knew (rank 0 then "never arrived"); 65536 wrapped
TEST(Hardening, AStorePortOutOfRangeIsAnError) {
  const std::string prompts = scratch_dir("port") + "/prompts.txt";
  write_file(prompts, "hello\n");
  for (const char* port : {"0", "65536"})
    expect_error(run_command("WORLD_SIZE=2 RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                             std::string(port) + " " + kBin + " generate --ckpt-path " +
                             tiny_ckpt() + " --input-file " + prompts),
                 "gloo: the store's port " + std::string(port) +
                     " (MASTER_PORT, DSINFER_STORE_PORT) is not in [1, 65535]");
}

// a symlink loop or a path too long said "does not exist"
TEST(Hardening, ACkptPathThatCannotBeLookedUpSaysWhy) {
  const std::string dir = scratch_dir("ckpt-loop");
  fs::create_symlink(dir + "/loop", dir + "/loop");
  expect_error(run_dsinfer("generate --ckpt-path " + dir + "/loop --input-file /dev/null"),
               "--ckpt-path " + dir + "/loop: Too many levels of symbolic links");
  const std::string long_name = dir + "/" + std::string(300, 'x');
  expect_error(run_dsinfer("generate --ckpt-path " + long_name + " --input-file /dev/null"),
               "--ckpt-path " + long_name + ": File name too long");
}

// eval --out "" or a directory wrote hidden files named ".json" and ".safetensors"
TEST(Hardening, AnEvalOutThatIsNoPrefixIsAnError) {
  const std::string dir = scratch_dir("eval-out");
  const std::string eval = "eval --ckpt-path " + tiny_ckpt() + " --case " +
                           data_path("golden/tiny-v3/ref-mp1-fp32.json") + " --out ";
  for (const auto& [arg, named] : std::vector<std::pair<std::string, std::string>>{
           {"''", "\"\""}, {dir + "/", dir + "/"}, {dir, dir}})
    expect_error(run_dsinfer(eval + arg), "--out " + named + " must be a file prefix");
  EXPECT_FALSE(fs::exists(dir + "/.json"));
}

// The throughput line divided by a clamped zero: "decode 1e+09 tokens/s" after one token
TEST(Hardening, ThroughputIsNotInventedForWhatWasNotTimed) {
  const std::string prompts = scratch_dir("rate") + "/prompts.txt";
  write_file(prompts, "hello\n");
  const auto r = run_dsinfer("generate --ckpt-path " + tiny_ckpt() + " --input-file " + prompts +
                             " --max-new-tokens 1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.err, "1 completion tokens; prefill ");
  EXPECT_CONTAINS(r.err, "decode - tokens/s");
  EXPECT_EQ(r.err.find("e+"), std::string::npos) << r.err;
}

// converting an earlier conversion named a tensor but no file
TEST(Hardening, ConvertingAConversionNamesTheFile) {
  expect_error(run_dsinfer("convert --hf-ckpt-path " + tiny_ckpt() + " --save-path " +
                           scratch_dir("reconvert") + "/out --n-experts 8 --model-parallel 1"),
               tiny_ckpt() + "/model0-mp1.safetensors: tensor ");
}

// NaN weights gave empty completions ("16 completion tokens" of nothing) and exit 0: a step whose
// logits hold NaN or +inf now ends the request with an error. Here the final norm is all NaN.
TEST(Hardening, NonFiniteLogitsEndTheGenerationWithAnError) {
  const std::string dir = scratch_dir("nan-weights"), ckpt = dir + "/ckpt";
  fs::copy(tiny_ckpt(), ckpt, fs::copy_options::recursive);
  const std::string shard = ckpt + "/model0-mp1.safetensors", tmp = shard + ".tmp";
  {
    SafetensorsFile in(shard);
    std::vector<SafetensorsWriter::Entry> entries;
    for (const auto& [name, t] : in.tensors()) entries.push_back({name, t.dtype, t.shape});
    SafetensorsWriter out(tmp, entries);
    for (const auto& [name, t] : in.tensors()) {
      std::vector<uint8_t> bytes(t.data, t.data + t.n_bytes);
      if (name == "head.weight")
        std::fill(bytes.begin(), bytes.end(),
                  uint8_t{0xFF});  // NaN (a matrix: load checks only the small tensors)
      out.write(name, bytes.data(), bytes.size());
    }
    out.finish();
  }
  fs::rename(tmp, shard);
  const std::string prompts = dir + "/prompts.txt";
  write_file(prompts, "hello\n");
  expect_error(run_dsinfer("generate --ckpt-path " + ckpt + " --input-file " + prompts +
                           " --max-new-tokens 4"),
               "the model's logits are not finite (NaN or infinity)");
}

// ---- a --ckpt-path that is not a directory (it was "config.json does not exist" inside it)

TEST(Hardening, ACkptPathThatIsNoDirectoryIsNamed) {
  const std::string file = scratch_dir("ckpt-file") + "/model.safetensors";
  write_file(file, "not a directory");
  const std::string missing = scratch_dir("ckpt-missing") + "/nowhere";
  for (const std::string& command :
       {std::string("generate --input-file /dev/null"), std::string("bench"),
        std::string("serve --port 1"), std::string("perplexity --input-file /dev/null"),
        std::string("eval --case " + data_path("golden/tiny-v3/ref-mp1-fp32.json") +
                    " --out /dev/null")}) {
    SCOPED_TRACE(command);
    const std::string sub = command.substr(0, command.find(' '));
    const std::string rest = command.substr(sub.size());
    expect_error(run_dsinfer(sub + " --ckpt-path " + file + rest),
                 "--ckpt-path " + file + " is not a directory");
    expect_error(run_dsinfer(sub + " --ckpt-path " + missing + rest),
                 "--ckpt-path " + missing + " does not exist");
  }
}

// ---- convert refuses a --n-experts its checkpoint contradicts (it wrote shards that failed only
// at load, as "another checkpoint")

TEST(Hardening, ConvertRefusesAWrongNExperts) {
  const std::string out = scratch_dir("wrong-experts");
  const std::string golden = data_path("golden/tiny-v3/hf");
  expect_error(run_dsinfer("convert --hf-ckpt-path " + golden + " --save-path " + out +
                           " --n-experts 16 --model-parallel 2"),
               "--n-experts 16 but " + golden + "/config.json says n_routed_experts 8");
  EXPECT_TRUE(fs::is_empty(out));
  const std::string lite = data_path("golden/tiny-v2-lite/hf");
  expect_error(run_dsinfer("convert --hf-ckpt-path " + lite + " --save-path " + out +
                           " --n-experts 64 --model-parallel 1"),
               "--n-experts 64 but " + lite + "/config.json says n_routed_experts");
}

// ---- a write that fails (a full disk; here a file-size limit, the same path) names the file and
// the system's reason, and leaves no half-written file (the tokenizer copy was EIO and half a file)

TEST(Hardening, AFailedTokenizerCopyNamesItAndLeavesNoPart) {
  const std::string hf = scratch_dir("hf-with-tokenizer");
  for (const auto& e : fs::directory_iterator(data_path("golden/tiny-v2-lite/hf")))
    fs::copy(e.path(), hf);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy(data_path(std::string("tokenizer/deepseek-v3/") + f), hf);
  const std::string out = scratch_dir("limited-out");
  const int experts =
      nlohmann::json::parse(test::read_file(hf + "/config.json"))["n_routed_experts"];
  // 4 MiB (bash counts KiB): the shard (2.1 MB) fits, tokenizer.json (7.8 MB) does not
  expect_error(run_command("bash -c 'ulimit -f 4096; " + kBin + " convert --hf-ckpt-path " + hf +
                           " --save-path " + out + " --n-experts " + std::to_string(experts) +
                           " --model-parallel 1'"),
               "cannot write " + out + "/tokenizer.json: File too large");
  for (const auto& e : fs::directory_iterator(out))
    EXPECT_EQ(e.path().filename().string().find("tokenizer.json"), std::string::npos) << e.path();
  // eval's outputs: a missing directory
  expect_error(run_dsinfer("eval --ckpt-path " + tiny_ckpt() + " --case " +
                           data_path("golden/tiny-v3/ref-mp1-fp32.json") + " --out " + out +
                           "/no/such/dir/o"),
               "cannot create " + out + "/no/such/dir/o.safetensors: No such file or directory");
}

// ---- a shard truncated while a chat has it mapped (it was a bare SIGBUS at the next prompt)

TEST(Hardening, AShardTruncatedDuringAChatIsNamed) {
  SKIP_UNDER_ASAN();
  const std::string ckpt =
      test::convert_golden("tiny-v3-chat", 1, /*with_tokenizer=*/true);  // its own: truncated
  const std::string dir = scratch_dir("truncated-shard");
  write_file(dir + "/chat.sh",
             "set -u\n"
             "mkfifo " +
                 dir + "/in\n" + kBin + " --threads 1 generate --ckpt-path " + ckpt +
                 " --interactive --max-new-tokens 3 --temperature 0 <" + dir + "/in >" + dir +
                 "/out 2>" + dir +
                 "/err &\n"
                 "pid=$!\n"
                 "exec 3>" +
                 dir +
                 "/in\n"
                 "echo hello >&3\n"
                 "for i in $(seq 400); do grep -q 'completion tokens' " +
                 dir +
                 "/err && break; sleep 0.05; done\n"
                 "truncate -s 0 " +
                 ckpt +
                 "/model0-mp1.safetensors\n"
                 "echo again >&3\n"
                 "exec 3>&-\n"
                 "wait $pid\n"
                 "status=$?\n"
                 "cat " +
                 dir +
                 "/err >&2\n"
                 "exit $status\n");
  const auto r = run_command("bash " + dir + "/chat.sh");
  EXPECT_CONTAINS(r.err, "completion tokens");  // the first turn ran on the whole shard
  expect_error(r, ckpt + "/model0-mp1.safetensors changed while dsinfer had it mapped");
}

}  // namespace
}  // namespace dsinfer::hardening_test
