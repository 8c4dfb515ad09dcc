/* Configuration: the TOML subset, every type of key and the boolean vocabulary, bad values and
 * unknown keys (warnings naming the file and line, or the variable), the layers (environment over
 * files, em_config_set over both), ember.toml at start-up and reload, and docs/config.md's key
 * tables against config_keys.def (build/tests/core_test_config --write-docs rewrites them). */
#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core_impl.h"
#include "harness.h"

#define DOCS "docs/config.md"

static char tmp_dir[256];
static int tmp_count;

static void tmp_path(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%d_%s", tmp_dir, tmp_count++, name);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* The file's contents (malloc'd); NULL when it cannot be read. */
static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t n = 0, cap = 4096;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n < 2) {
            char *grown = realloc(buf, cap * 2);
            if (!grown) break;
            buf = grown;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[n] = '\0';
    return buf;
}

static bool str_eq(const char *a, const char *b)
{
    return a && b && !strcmp(a, b);
}

/* ---- warnings ---------------------------------------------------------------------------- */

static char warnings[8192];
static int n_warnings;

static void warn_cb(void *user, const char *component, em_log_level level, const char *msg)
{
    if (level != EM_LOG_WARN || strcmp(component, "config")) return;
    n_warnings++;
    size_t n = strlen(warnings);
    snprintf(warnings + n, sizeof warnings - n, "%s\n", msg);
}

static void warnings_clear(void)
{
    warnings[0] = '\0';
    n_warnings = 0;
}

static bool warned(const char *needle)
{
    return strstr(warnings, needle) != NULL;
}

/* ---- the file format ---------------------------------------------------------------------- */

static const char *good_toml =
    "# a comment line\n"
    "cache_dir = \"Ember \\\"test\\\"\\t\\u00e9\"\n"
    "threads = +3\n"
    "cpu_cache_mb = 1_024\n"
    "store_max_header = 9_223_372_036_854_775_807\n"
    "store_zip_ratio = 0xff\n"
    "store_zip_entries = 0o17\n"
    "store_budget_scale = 0b101\n"
    "detect_anomaly = true\n"
    "cpu_huge_pages = false\n"
    "cuda_nvrtc = 'C:\\path'\n"
    "log_file = \"\"\n"
    "cpu_stream_stores = \"OFF\" # any case; stored as the table spells it\n"
    "  gemm=\"portable\"\r\n"
    "\n"
    "[log]\n"
    "testcpu = \"debug\"  # per-component level\n"
    "\n"
    "[ log.deep ] # a dotted table: log.deep.x is a component \"deep.x\"\n"
    "x = 'info'\n"
    "\"quoted\" = \"error\"\n";

typedef struct bad_case {
    const char *text;
    int line;
    const char *what;
} bad_case;

/* Each starts with seed = 1: a malformed file is refused whole, so the seed stays unset. */
static const bad_case bad_tomls[] = {
    {"seed = 1\n\ny = [1, 2]\n", 3, "arrays"},
    {"seed = 1\ny = \"unterminated\n", 2, "unterminated"},
    {"seed = 1\n[tbl\n", 2, "']'"},
    {"seed = 1\nx 1\n", 2, "expected '='"},
    {"seed = 1\nx = 01\n", 2, "leading zeros"},
    {"seed = 1\nseed = 2\n", 2, "duplicate"},
    {"seed = 1\nx = 1 2\n", 2, "unexpected"},
    {"seed = 1\nx = 1979-05-27\n", 2, "dates"},
    {"seed = 1\nx = tru\n", 2, "invalid value"},
    {"seed = 1\nx = 1__0\n", 2, "invalid value"},
    {"seed = 1\nx = 99999999999999999999\n", 2, "64 bits"},
    {"seed = 1\nx = \"\"\"multi\"\"\"\n", 2, "multi-line"},
    {"seed = 1\n[[arr]]\n", 2, "arrays of tables"},
    {"seed = 1\nx = { a = 1 }\n", 2, "inline tables"},
    {"seed = 1\nx = \"\\q\"\n", 2, "escape"},
    {"seed = 1\nx =\n", 2, "expected a value"},
    {"seed = 1\nx = 1.\n", 2, "invalid value"},
    {"seed = 1\n\n\n\n= 3\n", 5, "expected a key"},
};

static void test_file_format(void)
{
    char path[512];
    tmp_path(path, sizeof path, "good.toml");
    write_file(path, good_toml);
    warnings_clear();
    CHECK(em_config_load_file(path) == EM_OK, "load %s: %s", path, em_last_error());
    CHECK(n_warnings == 0, "a good file warns about nothing: %s", warnings);
    CHECK(str_eq(em_config_get_string("cache_dir"), "Ember \"test\"\t\xc3\xa9"),
          "basic string with escapes, got '%s'", em_config_get_string("cache_dir"));
    CHECK(em_config_get_int("threads") == 3, "a plus sign");
    CHECK(em_config_get_int("cpu_cache_mb") == 1024, "underscores");
    CHECK(em_config_get_int("store_max_header") == INT64_MAX, "int64 max");
    CHECK(em_config_get_int("store_zip_ratio") == 255, "hex");
    CHECK(em_config_get_int("store_zip_entries") == 15, "octal");
    CHECK(em_config_get_int("store_budget_scale") == 5, "binary");
    CHECK(em_config_get_bool("detect_anomaly") && !em_config_get_bool("cpu_huge_pages"),
          "TOML booleans");
    CHECK(str_eq(em_config_get_string("cuda_nvrtc"), "C:\\path"), "literal string");
    CHECK(str_eq(em_config_get_string("log_file"), ""), "empty string");
    CHECK(str_eq(em_config_get_string("cpu_stream_stores"), "off"), "an enum in any case");
    CHECK(core_cfg_is(CFG_CPU_STREAM_STORES, "off"), "core_cfg_is");
    CHECK(str_eq(em_config_get_string("gemm"), "portable"), "indented key, CRLF line");
    CHECK(str_eq(em_config_get_string("log.testcpu"), "debug"), "table key");
    CHECK(em_log_get_level("testcpu") == EM_LOG_DEBUG, "loading applies component levels");
    CHECK(em_log_get_level("deep.x") == EM_LOG_INFO &&
              em_log_get_level("deep.quoted") == EM_LOG_ERROR,
          "dotted table, quoted key");
    CHECK(em_config_is_set("log.testcpu") && !em_config_is_set("log.elsewhere"),
          "em_config_is_set on a family");
    CHECK(str_eq(em_config_get_string("log.elsewhere"), "warn"),
          "an unset component: the log level");
    char where[600];
    snprintf(where, sizeof where, "%s:3", path);
    CHECK(str_eq(core_cfg_source(CFG_THREADS), where), "the source names file and line, got '%s'",
          core_cfg_source(CFG_THREADS));
    CHECK(em_config_get_int("seed") == 0 && !em_config_is_set("seed"), "unset: the default");
    em_clear_error();

    /* malformed files: an error naming file and line, nothing merged */
    for (size_t i = 0; i < sizeof bad_tomls / sizeof *bad_tomls; i++) {
        tmp_path(path, sizeof path, "bad.toml");
        write_file(path, bad_tomls[i].text);
        char needle[600];
        snprintf(needle, sizeof needle, "%s:%d:", path, bad_tomls[i].line);
        CHECK(em_config_load_file(path) == EM_ERR_FORMAT, "case %zu is rejected", i);
        CHECK(strstr(em_last_error(), needle) && strstr(em_last_error(), bad_tomls[i].what),
              "case %zu: '%s' should name '%s' and say '%s'", i, em_last_error(), needle,
              bad_tomls[i].what);
        em_clear_error();
        CHECK(!em_config_is_set("seed"), "case %zu: nothing merged", i);
        unlink(path);
    }
    CHECK(em_config_load_file("/nonexistent-ember-dir/x.toml") == EM_ERR_IO, "missing file");
    CHECK_ERR(EM_ERR_IO, "x.toml");
}

/* ---- types -------------------------------------------------------------------------------- */

static void test_types(void)
{
    /* booleans: true/false, on/off, yes/no, 1/0 in any case */
    static const char *const yes[] = {"true", "on", "yes", "1", "TRUE", "On", "YES"};
    static const char *const no[] = {"false", "off", "no", "0", "False", "OFF", "No"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
        CHECK(em_config_set("cpu_fallback", yes[i]) == EM_OK && em_config_get_bool("cpu_fallback"),
              "'%s' is true", yes[i]);
        CHECK(em_config_set("cpu_fallback", no[i]) == EM_OK && !em_config_get_bool("cpu_fallback"),
              "'%s' is false", no[i]);
    }
    CHECK(em_config_set("cpu_fallback", "maybe") == EM_ERR_INVALID_ARG, "not a boolean");
    CHECK_ERR(EM_ERR_INVALID_ARG, "cpu_fallback = 'maybe' is not a boolean (true/false, on/off");
    CHECK(em_config_set("cpu_fallback", "") == EM_ERR_INVALID_ARG, "empty is no boolean");
    em_clear_error();
    CHECK(em_config_set("cpu_fallback", NULL) == EM_OK && !em_config_get_bool("cpu_fallback") &&
              !em_config_is_set("cpu_fallback"),
          "removed: the default");

    /* integers: the range, and `auto` where the table allows it */
    CHECK(em_config_set("threads", "-1") == EM_ERR_INVALID_ARG, "below the range");
    CHECK_ERR(EM_ERR_INVALID_ARG, "threads = '-1' is not an integer from 0 to 2147483647");
    CHECK(em_config_set("threads", "2147483648") == EM_ERR_INVALID_ARG, "above the range");
    CHECK(em_config_set("threads", "abc") == EM_ERR_INVALID_ARG, "not a number");
    CHECK(em_config_set("threads", "3.5") == EM_ERR_INVALID_ARG, "not an integer");
    CHECK(em_config_set("threads", " 3") == EM_ERR_INVALID_ARG, "no leading blanks");
    CHECK(em_config_set("threads", "auto") == EM_ERR_INVALID_ARG, "threads takes no auto");
    em_clear_error();
    CHECK(em_config_set("cuda_gemv_parts", "7") == EM_OK &&
              em_config_get_int("cuda_gemv_parts") == 7,
          "an integer");
    CHECK(em_config_set("cuda_gemv_parts", "AUTO") == EM_OK &&
              em_config_get_int("cuda_gemv_parts") == 0 && core_cfg_int(CFG_CUDA_GEMV_PARTS) == 0,
          "auto is 0");
    CHECK(em_config_set("cuda_gemv_parts", "65") == EM_ERR_INVALID_ARG, "past 64");
    CHECK_ERR(EM_ERR_INVALID_ARG, "from 0 to 64 or auto");
    CHECK(em_config_set("cuda_gemv_parts", NULL) == EM_OK, "unset");
    CHECK(em_config_set("store_max_header", "9223372036854775807") == EM_OK &&
              em_config_get_int("store_max_header") == INT64_MAX,
          "int64 max");
    CHECK(em_config_set("store_max_header", "9223372036854775808") == EM_ERR_INVALID_ARG,
          "past int64");
    CHECK(em_config_set("store_max_header", "0") == EM_ERR_INVALID_ARG, "a limit is positive");
    em_clear_error();
    CHECK(em_config_set("store_max_header", NULL) == EM_OK &&
              em_config_get_int("store_max_header") == INT64_MAX,
          "back to the file's value");

    /* the seed: unsigned 64 bits, applied */
    CHECK(em_config_set("seed", "18446744073709551615") == EM_OK &&
              em_rng_get_state().seed == UINT64_MAX && em_rng_get_state().offset == 0,
          "seed 2^64 - 1 applied");
    CHECK(em_config_set("seed", "-1") == EM_ERR_INVALID_ARG, "a negative seed");
    CHECK_ERR(EM_ERR_INVALID_ARG, "seed = '-1' is not an unsigned 64-bit integer");
    CHECK(em_config_set("seed", "77") == EM_OK && em_rng_get_state().seed == 77, "seed 77");
    CHECK(em_config_set("seed", NULL) == EM_OK, "unset seed");

    /* enums: any case in, the table's spelling out */
    CHECK(em_config_set("cuda_mm_tile", "Wide") == EM_OK &&
              str_eq(em_config_get_string("cuda_mm_tile"), "wide") &&
              core_cfg_is(CFG_CUDA_MM_TILE, "wide") && !core_cfg_is(CFG_CUDA_MM_TILE, "narrow"),
          "an enum");
    CHECK(em_config_set("dashboard", "0") == EM_OK &&
              str_eq(em_config_get_string("dashboard"), "off") &&
              em_config_set("dashboard", "Yes") == EM_OK &&
              str_eq(em_config_get_string("dashboard"), "on") &&
              em_config_set("dashboard", NULL) == EM_OK,
          "a choice with on and off takes the boolean words");
    CHECK(em_config_set("cuda_mm_tile", "1") == EM_ERR_INVALID_ARG, "not without on and off");
    em_clear_error();
    CHECK(em_config_set("cuda_mm_tile", "square") == EM_ERR_INVALID_ARG, "not a value");
    CHECK_ERR(EM_ERR_INVALID_ARG, "cuda_mm_tile = 'square' is not one of auto, narrow, wide");
    CHECK(em_config_set("cuda_mm_tile", NULL) == EM_OK &&
              str_eq(em_config_get_string("cuda_mm_tile"), "auto"),
          "the default");
    CHECK(em_config_set("log", "Warning") == EM_OK && em_log_get_level("x") == EM_LOG_WARN,
          "warning for warn");
    CHECK(em_config_set("log.x", "loud") == EM_ERR_INVALID_ARG, "bad level");
    CHECK_ERR(EM_ERR_INVALID_ARG, "loud");
    CHECK(em_config_set("log.setcomp", "error") == EM_OK &&
              em_log_get_level("setcomp") == EM_LOG_ERROR,
          "em_config_set applies levels");
    CHECK(em_config_set("log", NULL) == EM_OK, "unset log");

    /* strings: anything; a string key may have no value */
    CHECK(em_config_get_string("cuda_nvrtc") == NULL || em_config_is_set("cuda_nvrtc"),
          "no default");
    CHECK(em_config_set("cache_dir", "/tmp/x y") == EM_OK &&
              str_eq(em_config_get_string("cache_dir"), "/tmp/x y"),
          "a string");
    const char *before = em_config_get_string("cache_dir");
    CHECK(em_config_set("cache_dir", "/elsewhere") == EM_OK && str_eq(before, "/tmp/x y"),
          "earlier results stay valid");
    CHECK(em_config_set("cache_dir", NULL) == EM_OK, "unset");

    /* getters: the key's type, known keys only */
    CHECK(!em_config_get_bool("threads"), "a bool getter on an int key");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_config_get_bool: threads is an integer key");
    CHECK(em_config_get_int("device") == 0, "an int getter on a string key");
    CHECK_ERR(EM_ERR_INVALID_ARG, "device is a string key");
    CHECK(em_config_get_string("threads") == NULL, "a string getter on an int key");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_config_get_string");
    CHECK(em_config_get_int("no_such_key") == 0, "unknown key");
    CHECK_ERR(EM_ERR_INVALID_ARG, "unknown key 'no_such_key'");
    CHECK(!em_config_is_set("no_such_key"), "unknown key");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_config_is_set: unknown key");
    CHECK(em_config_set("no_such_key", "1") == EM_ERR_INVALID_ARG, "unknown key");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_config_set: unknown key 'no_such_key'");
    CHECK(em_config_set(NULL, "1") == EM_ERR_INVALID_ARG, "NULL key");
    CHECK_ERR(EM_ERR_INVALID_ARG, "key");
    CHECK(em_config_get_string(NULL) == NULL, "NULL key");
    CHECK_ERR(EM_ERR_INVALID_ARG, "key is NULL");

    /* every key's default is one of its values, and every key takes it back */
    for (int k = 0; k < CFG_COUNT; k++) {
        static const char *const names[] = {
#define CFG(id, name, ...) name,
#include "core/config_keys.def"
#undef CFG
        };
        static const char *const defaults[] = {
#define CFG(id, name, type, def, ...) def,
#include "core/config_keys.def"
#undef CFG
        };
        if (strchr(names[k], '<')) continue;
        if (defaults[k])
            CHECK(em_config_set(names[k], defaults[k]) == EM_OK, "%s takes its default '%s': %s",
                  names[k], defaults[k], em_last_error());
        CHECK(em_config_set(names[k], NULL) == EM_OK, "%s unset", names[k]);
        em_clear_error();
    }
}

/* ---- bad settings in files and the environment ------------------------------------------- */

static void test_warnings(void)
{
    char path[512];
    tmp_path(path, sizeof path, "warn.toml");
    write_file(path, "cpu_cache_mb = 64\n"
                     "thread = 4\n"
                     "cuda_wgmma = \"sometimes\"\n"
                     "\n"
                     "[cuda]\n"
                     "tf32 = true\n"
                     "[log]\n"
                     "cpu = \"loud\"\n");
    warnings_clear();
    CHECK(em_config_load_file(path) == EM_OK, "a file with bad settings still loads");
    char needle[800];
    snprintf(needle, sizeof needle, "%s:2: unknown key 'thread'; ignored", path);
    CHECK(warned(needle), "unknown key with file and line, warnings: %s", warnings);
    snprintf(needle, sizeof needle,
             "%s:3: cuda_wgmma = 'sometimes' is not a boolean (true/false, on/off, yes/no, "
             "1/0); ignored",
             path);
    CHECK(warned(needle), "bad value with file and line, warnings: %s", warnings);
    snprintf(needle, sizeof needle, "%s:6: unknown key 'cuda.tf32'", path);
    CHECK(warned(needle), "a table's key, warnings: %s", warnings);
    snprintf(needle, sizeof needle, "%s:8: log.cpu = 'loud' is not one of trace", path);
    CHECK(warned(needle), "a bad level, warnings: %s", warnings);
    CHECK(n_warnings == 4, "four warnings, got %d: %s", n_warnings, warnings);
    CHECK(em_config_get_int("cpu_cache_mb") == 64, "the good key is read");
    CHECK(em_config_get_bool("cuda_wgmma") && !em_config_is_set("cuda_wgmma"),
          "the bad one keeps its default");
    CHECK(!em_failed(), "warnings are no errors");

    /* the environment: the variable is named */
    setenv("EMBER_CPU_CACHE_MB", "lots", 1);
    setenv("EMBER_LOG_ENVCOMP", "chatty", 1);
    warnings_clear();
    CHECK(em_config_reload() == EM_OK, "reload");
    CHECK(warned("EMBER_CPU_CACHE_MB: cpu_cache_mb = 'lots' is not an integer from 0 to"),
          "bad variable named, warnings: %s", warnings);
    CHECK(warned("EMBER_LOG_ENVCOMP: log.envcomp = 'chatty' is not one of"),
          "bad component level named, warnings: %s", warnings);
    CHECK(em_config_get_int("cpu_cache_mb") == 64, "the file's value stays");
    unsetenv("EMBER_CPU_CACHE_MB");
    unsetenv("EMBER_LOG_ENVCOMP");
    CHECK(em_config_reload() == EM_OK, "reload");
    em_clear_error();

    /* a file's own level for the config component holds for the warnings about that file */
    tmp_path(path, sizeof path, "quiet.toml");
    write_file(path, "nonsense = 1\n[log]\nconfig = \"error\"\n");
    warnings_clear();
    CHECK(em_config_load_file(path) == EM_OK && n_warnings == 0,
          "log.config = error silences the file's warnings: %s", warnings);
    CHECK(em_config_set("log.config", "warn") == EM_OK, "config warnings back");
}

/* ---- layers ------------------------------------------------------------------------------- */

static void test_layers(void)
{
    char path[512];
    tmp_path(path, sizeof path, "layers.toml");
    write_file(path, "cpu_cache_mb = 42\ncuda_split_k = 3\n");
    CHECK(em_config_load_file(path) == EM_OK, "load");
    CHECK(em_config_get_int("cpu_cache_mb") == 42, "the file");

    /* the environment is read at start-up and by em_config_reload, and wins over files */
    setenv("EMBER_CPU_CACHE_MB", "7", 1);
    CHECK(em_config_get_int("cpu_cache_mb") == 42, "read once: not before a reload");
    CHECK(em_config_reload() == EM_OK && em_config_get_int("cpu_cache_mb") == 7,
          "EMBER_CPU_CACHE_MB overrides the file");
    CHECK(str_eq(core_cfg_source(CFG_CPU_CACHE_MB), "EMBER_CPU_CACHE_MB"), "the source");
    setenv("EMBER_CUDA_SPLIT_K", "", 1);
    CHECK(em_config_reload() == EM_OK && em_config_get_int("cuda_split_k") == 3,
          "an empty variable counts as unset");
    CHECK(em_config_set("cpu_cache_mb", "100") == EM_OK &&
              em_config_get_int("cpu_cache_mb") == 100 &&
              str_eq(core_cfg_source(CFG_CPU_CACHE_MB), "em_config_set"),
          "em_config_set beats the environment");
    CHECK(em_config_set("cpu_cache_mb", NULL) == EM_OK && em_config_get_int("cpu_cache_mb") == 7,
          "back to the environment");
    unsetenv("EMBER_CPU_CACHE_MB");
    unsetenv("EMBER_CUDA_SPLIT_K");
    CHECK(em_config_reload() == EM_OK && em_config_get_int("cpu_cache_mb") == 42,
          "back to the file");

    /* a later file wins */
    tmp_path(path, sizeof path, "later.toml");
    write_file(path, "cpu_cache_mb = 43\n");
    CHECK(em_config_load_file(path) == EM_OK && em_config_get_int("cpu_cache_mb") == 43 &&
              em_config_get_int("cuda_split_k") == 3,
          "the later file wins, the earlier one's other keys stay");

    /* threads: EMBER_NUM_THREADS is an alias; EMBER_THREADS wins over it */
    int orig_threads = em_get_num_threads();
    setenv("EMBER_NUM_THREADS", "3", 1);
    CHECK(em_config_reload() == EM_OK && em_get_num_threads() == 3 &&
              str_eq(core_cfg_source(CFG_THREADS), "EMBER_NUM_THREADS"),
          "EMBER_NUM_THREADS applied");
    setenv("EMBER_THREADS", "2", 1);
    CHECK(em_config_reload() == EM_OK && em_get_num_threads() == 2, "EMBER_THREADS wins");
    unsetenv("EMBER_THREADS");
    unsetenv("EMBER_NUM_THREADS");
    em_set_num_threads(orig_threads);

    /* component levels from the environment */
    setenv("EMBER_LOG_ENVCOMP", "trace", 1);
    CHECK(em_config_reload() == EM_OK && em_log_get_level("envcomp") == EM_LOG_TRACE,
          "EMBER_LOG_<COMPONENT> applied");
    unsetenv("EMBER_LOG_ENVCOMP");
    setenv("EMBER_LOG", "error", 1);
    CHECK(em_config_reload() == EM_OK, "reload");
    CHECK(em_log_get_level("whatever") == EM_LOG_ERROR, "EMBER_LOG sets the fallback");
    CHECK(em_log_get_level("testcpu") == EM_LOG_DEBUG, "per-component keys still win");
    unsetenv("EMBER_LOG");
    CHECK(em_config_reload() == EM_OK, "reload");
    em_log_set_level(NULL, EM_LOG_WARN);
}

/* ---- ember.toml ---------------------------------------------------------------------------- */

static void test_ember_toml(const char *argv0)
{
    write_file("ember.toml", "seed = 1234\nlog.tomlcomp = \"error\"\n[log]\nother = 'info'\n");
    CHECK(em_config_reload() == EM_OK, "reload with ember.toml: %s", em_last_error());
    CHECK(em_config_get_int("seed") == 1234 && str_eq(core_cfg_source(CFG_SEED), "ember.toml:1"),
          "ember.toml read");
    CHECK(em_rng_get_state().seed == 1234 && em_rng_get_state().offset == 0, "seed applied");
    CHECK(em_log_get_level("tomlcomp") == EM_LOG_ERROR, "dotted level key applied");
    CHECK(em_log_get_level("other") == EM_LOG_INFO, "[log] table applied");
    setenv("EMBER_SEED", "99", 1);
    CHECK(em_config_reload() == EM_OK && em_rng_get_state().seed == 99, "EMBER_SEED wins");
    unsetenv("EMBER_SEED");
    write_file("ember.toml", "seed = 5\nthreads = \n");
    CHECK(em_config_reload() == EM_ERR_FORMAT, "malformed ember.toml");
    CHECK_ERR(EM_ERR_FORMAT, "ember.toml:2:");
    CHECK(em_config_get_int("seed") == 1234, "a malformed ember.toml leaves the old values");
    unlink("ember.toml");
    CHECK(em_config_reload() == EM_OK && !em_config_is_set("seed"), "ember.toml removed");

    /* At start-up a bad ember.toml is a warning, not a failure: run this program again in a
     * directory holding one, as a child that initialises the library from scratch. */
    write_file("ember.toml", "threads = 3\nlog = \"loud\"\nbroken line\n");
    char errpath[512];
    tmp_path(errpath, sizeof errpath, "child_stderr.txt");
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) dup2(fd, 2);
        execl("/proc/self/exe", argv0, "--child", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork the child");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child with a bad ember.toml: status %d",
          status);
    char *text = read_all(errpath);
    CHECK(text && strstr(text, "ember[config] WARN:") && strstr(text, "ember.toml:3:"),
          "child warned about ember.toml line 3, stderr: '%s'", text ? text : "");
    free(text);
    unlink(errpath);

    /* and a well-formed one with a bad value: that key alone is left out, named */
    write_file("ember.toml", "threads = 3\nlog = \"loud\"\n");
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid == 0) {
        int fd = open(errpath, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) dup2(fd, 2);
        execl("/proc/self/exe", argv0, "--child3", (char *)NULL);
        _exit(127);
    }
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork the second child");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child with a bad value: status %d",
          status);
    text = read_all(errpath);
    CHECK(text && strstr(text, "ember.toml:2: log = 'loud' is not one of trace"),
          "child named the bad value, stderr: '%s'", text ? text : "");
    free(text);
    unlink(errpath);
    unlink("ember.toml");
}

/* The children of test_ember_toml: the library's first call meets the ember.toml. */
static int child(int threads)
{
    int n = em_get_num_threads();
    bool ok = !em_failed() && (threads ? n == threads : !em_config_is_set("threads"));
    return ok ? 0 : 1;
}

/* ---- docs/config.md ----------------------------------------------------------------------- */

typedef struct key_doc {
    const char *name, *type, *def, *values, *component, *doc;
    int64_t min, max;
} key_doc;

static const key_doc key_docs[] = {
#define CFG(id, name, type, def, min, max, values, component, doc)                                 \
    {name, #type, def, values, component, doc, min, max},
#include "core/config_keys.def"
#undef CFG
};

#define BEGIN_MARK "<!-- keys: generated from src/core/config_keys.def"
#define END_MARK   "<!-- end of keys -->"

typedef struct sbuf {
    char *s;
    size_t n, cap;
} sbuf;

static void put(sbuf *b, const char *fmt, ...) EM_PRINTF(2, 3);

static void put(sbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->n + (size_t)len + 1 > b->cap) {
        size_t cap = (b->n + (size_t)len + 1) * 2;
        char *grown = realloc(b->s, cap);
        if (!grown) return;
        b->s = grown;
        b->cap = cap;
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    b->n += (size_t)len;
}

/* "`a`, `b`" from "a|b". */
static void put_values(sbuf *b, const char *values)
{
    for (const char *p = values; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        put(b, "%s`%.*s`", p == values ? "" : ", ", (int)len, p);
        p = bar ? bar + 1 : p + len;
    }
}

/* The generated part of docs/config.md: one table per component, in the table's order. */
static char *render_keys(void)
{
    sbuf b = {0};
    put(&b,
        "%s; `build/tests/core_test_config --write-docs` in the source folder rewrites "
        "this part -->\n",
        BEGIN_MARK);
    const char *component = "";
    for (size_t i = 0; i < sizeof key_docs / sizeof *key_docs; i++) {
        const key_doc *k = &key_docs[i];
        if (strcmp(k->component, component)) {
            component = k->component;
            put(&b,
                "\n### %s\n\n| Key | Environment | Type | Default | Meaning |\n"
                "|---|---|---|---|---|\n",
                component);
        }
        char env[128];
        size_t n = (size_t)snprintf(env, sizeof env, "EMBER_%s", k->name);
        for (size_t j = 6; j < n; j++)
            env[j] = (env[j] == '.' || env[j] == '-') ? '_' : (char)toupper((unsigned char)env[j]);
        put(&b, "| `%s` | `%s` | ", k->name, env);
        if (!strcmp(k->type, "BOOL")) {
            put(&b, "boolean");
        } else if (!strcmp(k->type, "INT")) {
            if (k->max >= ((int64_t)1 << 40))
                put(&b, "integer, at least %lld", (long long)k->min);
            else
                put(&b, "integer, %lld to %lld", (long long)k->min, (long long)k->max);
            if (k->values) put(&b, ", or `auto` (0)");
        } else if (!strcmp(k->type, "U64")) {
            put(&b, "unsigned 64-bit integer");
        } else if (!strcmp(k->type, "ENUM")) {
            put_values(&b, k->values);
        } else {
            put(&b, "string");
        }
        if (k->def)
            put(&b, " | `%s` | %s |\n", k->def, k->doc);
        else
            put(&b, " | none | %s |\n", k->doc);
        CHECK(!strchr(k->doc, '|') && !strchr(k->doc, '\n'), "%s: the doc string fits a table cell",
              k->name);
    }
    put(&b, "\n%s", END_MARK);
    return b.s;
}

/* docs/config.md holds exactly the rendered tables; with write, they are put there. */
static void test_docs(bool write)
{
    char *text = read_all(DOCS);
    CHECK(text != NULL, "read %s (run from the source folder)", DOCS);
    if (!text) return;
    char *want = render_keys();
    char *begin = strstr(text, BEGIN_MARK), *end = begin ? strstr(begin, END_MARK) : NULL;
    CHECK(begin && end, "%s has the markers '%s' ... '%s'", DOCS, BEGIN_MARK, END_MARK);
    if (begin && end && want) {
        size_t have_len = (size_t)(end - begin) + strlen(END_MARK);
        bool same = have_len == strlen(want) && !memcmp(begin, want, have_len);
        if (write && !same) {
            FILE *f = fopen(DOCS, "wb");
            CHECK(f != NULL, "write %s", DOCS);
            if (f) {
                fwrite(text, 1, (size_t)(begin - text), f);
                fputs(want, f);
                fputs(end + strlen(END_MARK), f);
                fclose(f);
                printf("rewrote the key tables of %s\n", DOCS);
            }
        } else {
            CHECK(same,
                  "%s's key tables differ from src/core/config_keys.def: run "
                  "build/tests/core_test_config --write-docs in the source folder",
                  DOCS);
        }
    }
    /* and no other part of the page names a key the table does not have */
    for (const char *p = text; (p = strstr(p, "`EMBER_")) != NULL; p++) {
        char var[128];
        size_t n = 0;
        while (n < 127 && (isupper((unsigned char)p[1 + n]) || isdigit((unsigned char)p[1 + n]) ||
                           p[1 + n] == '_'))
            n++;
        snprintf(var, sizeof var, "%.*s", (int)n, p + 1);
        bool known = !strncmp(var, "EMBER_LOG_", 10) || !strcmp(var, "EMBER_");
        for (size_t i = 0; !known && i < sizeof key_docs / sizeof *key_docs; i++) {
            char env[128];
            size_t m = (size_t)snprintf(env, sizeof env, "EMBER_%s", key_docs[i].name);
            for (size_t j = 6; j < m; j++)
                env[j] =
                    (env[j] == '.' || env[j] == '-') ? '_' : (char)toupper((unsigned char)env[j]);
            known = !strcmp(env, var) || !strcmp(var, "EMBER_NUM_THREADS");
        }
        CHECK(known, "%s names %s, which no key has", DOCS, var);
    }
    free(want);
    free(text);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--child")) return child(0);
    if (argc > 1 && !strcmp(argv[1], "--child3")) return child(3);
    h_init();
    if (argc > 1 && !strcmp(argv[1], "--write-docs")) {
        test_docs(true);
        return h_finish();
    }
    test_docs(false);
    char cwd[1024];
    CHECK(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
    const char *tmp = getenv("TMPDIR");
    snprintf(tmp_dir, sizeof tmp_dir, "%s/ember_test_config_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    CHECK(mkdtemp(tmp_dir) != NULL, "make a temporary directory");
    /* work in the temporary directory so that no stray ember.toml is read */
    CHECK(chdir(tmp_dir) == 0, "chdir to %s", tmp_dir);
    static const char *const env_keys[] = {
        "EMBER_THREADS",     "EMBER_NUM_THREADS", "EMBER_SEED",        "EMBER_LOG",
        "EMBER_LOG_ENVCOMP", "EMBER_LOG_FILE",    "EMBER_CPU_CACHE_MB"};
    for (size_t i = 0; i < sizeof env_keys / sizeof *env_keys; i++) unsetenv(env_keys[i]);
    CHECK(em_config_reload() == EM_OK, "reload without ember.toml");
    em_log_to_stderr(false);
    em_log_set_callback(warn_cb, NULL);

    test_file_format();
    test_types();
    test_warnings();
    test_layers();
    test_ember_toml(argv[0]);

    em_log_set_callback(NULL, NULL);
    em_log_to_stderr(true);
    em_log_set_level(NULL, EM_LOG_WARN);
    CHECK(chdir(cwd) == 0, "chdir back");
    rmdir(tmp_dir);
    return h_finish();
}
