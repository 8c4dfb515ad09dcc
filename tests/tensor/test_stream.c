/* Streams and events on devices without them (the CPU and the test-only sim device): the calls
 * succeed and do nothing, events time on the host clock, and bad arguments give clear errors.
 * Graphs there: refused with a clear error. em_copy_into between and within them. */
#include "harness.h"

static void test_device(em_device dev, const char *name)
{
    em_scope_begin();
    em_stream *s = em_stream_new(dev);
    CHECK(s != NULL, "%s: em_stream_new (%s)", name, em_last_error());
    em_stream *def = em_stream_current(dev);
    CHECK(def != NULL && def != s, "%s: the default stream is current at first", name);
    CHECK(em_stream_use(dev, s) == EM_OK, "%s: em_stream_use", name);
    CHECK(em_stream_current(dev) == s, "%s: em_stream_current after use", name);
    em_stream *hi = em_stream_new_priority(dev, -2);
    CHECK(hi && em_stream_priority(hi) == 0 && em_stream_priority(s) == 0,
          "%s: a priority is ignored where there are none", name);
    em_stream_free(hi);

    em_event *a = em_event_new(dev), *b = em_event_new(dev);
    CHECK(a && b, "%s: em_event_new", name);
    CHECK(em_event_record(a, NULL) == EM_OK, "%s: record on the current stream", name);
    double v[4] = {1, 2, 3, 4};
    em_tensor *x = em_from_data(v, EM_F64, EM_SHAPE(4), EM_F64, EM_CPU);
    em_tensor *y = em_to_device(em_add_scalar(em_mul_scalar(x, 2.0), 1.0), dev);
    CHECK(em_event_record(b, s) == EM_OK, "%s: record on s", name);
    CHECK(em_stream_wait(NULL, b) == EM_OK, "%s: em_stream_wait", name);
    CHECK(em_event_sync(b) == EM_OK, "%s: em_event_sync", name);
    CHECK(em_stream_sync(s) == EM_OK, "%s: em_stream_sync", name);
    double ms = em_event_elapsed_ms(a, b);
    CHECK(ms >= 0 && isfinite(ms), "%s: elapsed %g ms", name, ms);
    double want[4] = {3, 5, 7, 9};
    h_check_tensor(name, y, want, EM_SHAPE(4), 0, 0);
    CHECK_OK(name);

    CHECK(em_stream_use(dev, NULL) == EM_OK, "%s: back to the default stream", name);
    CHECK(em_stream_current(dev) == def, "%s: the default stream again", name);
    em_stream_use(dev, s);
    em_stream_free(s); /* current: the thread goes back to its default */
    CHECK(em_stream_current(dev) == def, "%s: freeing the current stream restores the default",
          name);
    em_stream_free(def); /* the library's handle: ignored */
    em_stream_free(NULL);
    CHECK(em_stream_current(dev) == def, "%s: the default handle survives em_stream_free", name);

    em_event *never = em_event_new(dev);
    CHECK(isnan(em_event_elapsed_ms(a, never)), "%s: elapsed with an unrecorded event", name);
    CHECK_ERR(EM_ERR_INVALID_ARG, "never recorded");
    em_event_free(never);
    em_event_free(a);
    em_event_free(b);
    em_event_free(NULL);
    em_scope_end();
}

static void test_errors(void)
{
    CHECK(em_stream_sync(NULL) != EM_OK, "em_stream_sync(NULL) fails");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_stream_sync: argument `s` is NULL");
    CHECK(em_event_record(NULL, NULL) != EM_OK, "em_event_record(NULL) fails");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_event_record: argument `e` is NULL");
    CHECK(em_stream_wait(NULL, NULL) != EM_OK, "em_stream_wait(NULL, NULL) fails");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_stream_wait: argument `e` is NULL");
    CHECK(em_event_sync(NULL) != EM_OK, "em_event_sync(NULL) fails");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_event_sync");
    CHECK(isnan(em_event_elapsed_ms(NULL, NULL)), "elapsed of NULL events");
    CHECK_ERR(EM_ERR_INVALID_ARG, "em_event_elapsed_ms");
    em_device nodev = {0, 3};
    CHECK(em_stream_new(nodev) == NULL, "a stream on cpu:3");
    CHECK_ERR(EM_ERR_DEVICE, "em_stream_new: device 0:3 does not exist");
    CHECK(em_event_new(nodev) == NULL, "an event on cpu:3");
    CHECK_ERR(EM_ERR_DEVICE, "does not exist");

    em_device sim = em_device_parse("sim:0");
    CHECK_OK("sim:0");
    em_stream *s = em_stream_new(sim);
    CHECK(em_stream_use(EM_CPU, s) != EM_OK, "a sim stream is not the cpu's");
    CHECK_ERR(EM_ERR_DEVICE, "em_stream_use: the stream belongs to device");
    em_event *e = em_event_new(EM_CPU);
    CHECK(em_event_record(e, s) != EM_OK, "a cpu event on a sim stream");
    CHECK_ERR(EM_ERR_DEVICE, "em_event_record: the event belongs to device");
    em_event *f = em_event_new(sim);
    em_event_record(e, NULL);
    em_event_record(f, NULL);
    CHECK(isnan(em_event_elapsed_ms(e, f)), "elapsed across devices");
    CHECK_ERR(EM_ERR_DEVICE, "different devices");
    em_event_free(e);
    em_event_free(f);
    em_stream_free(s);
}

static void test_graphs_refused(void)
{
    em_device sim = em_device_parse("sim:0");
    CHECK(em_graph_capture_begin(EM_CPU) == EM_ERR_UNSUPPORTED, "no graphs on the cpu");
    CHECK_ERR(EM_ERR_UNSUPPORTED, "em_graph_capture_begin: cpu has no graphs");
    CHECK(em_graph_capture_end(sim) == NULL, "no graphs on sim");
    CHECK_ERR(EM_ERR_UNSUPPORTED, "em_graph_capture_end: ");
    CHECK(em_graph_capture_begin((em_device){0, 5}) == EM_ERR_DEVICE, "cpu:5");
    CHECK_ERR(EM_ERR_DEVICE, "does not exist");
    CHECK(em_graph_replay(NULL) == EM_ERR_INVALID_ARG, "replay NULL");
    CHECK_ERR(EM_ERR_INVALID_ARG, "argument `g` is NULL");
    CHECK(em_graph_memory_bytes(NULL) == 0, "NULL holds nothing");
    em_graph_free(NULL);
    CHECK(!em_graph_capturing(EM_CPU) && !em_graph_capturing(sim) &&
              !em_graph_capturing((em_device){-1, 0}) && !em_graph_capturing((em_device){0, -3}),
          "nothing captures on devices without graphs");
}

/* em_copy_into: values from every pair of devices and dtypes into dst's own memory (views of it
 * see them), and its errors. */
static void test_copy_into(void)
{
    em_device sim = em_device_parse("sim:0");
    em_device devs[2] = {EM_CPU, sim};
    const double v[6] = {1, -2, 3.5, 4, 5, -6.25};
    for (int i = 0; i < 4; i++) {
        em_scope_begin();
        em_device dd = devs[i & 1], sd = devs[i >> 1];
        em_tensor *dst = em_zeros(EM_SHAPE(2, 3), EM_F32, dd);
        em_tensor *view = em_reshape(dst, EM_SHAPE(6));
        void *before = dd.backend == 0 ? em_tensor_data(dst) : NULL;
        /* f64 into f32 (the sim device converts f32 only: f32 when both are there) */
        em_dtype sdt = i == 3 ? EM_F32 : EM_F64;
        em_tensor *src = em_from_data(v, EM_F64, EM_SHAPE(2, 3), sdt, sd);
        CHECK(em_copy_into(dst, src) == EM_OK, "%d: into f32 (%s)", i, em_last_error());
        h_check_tensor("em_copy_into", dst, v, EM_SHAPE(2, 3), 0, 0);
        h_check_tensor("a view of dst", view, v, EM_SHAPE(6), 0, 0);
        CHECK(dd.backend != 0 || em_tensor_data(dst) == before, "%d: the same memory", i);
        /* a transposed source */
        em_tensor *t = em_transpose(em_from_data(v, EM_F64, EM_SHAPE(3, 2), EM_F32, sd), 0, 1);
        CHECK(em_copy_into(dst, t) == EM_OK, "%d: transposed source (%s)", i, em_last_error());
        const double tv[6] = {1, 3.5, 5, -2, 4, -6.25};
        h_check_tensor("from a transposed source", dst, tv, EM_SHAPE(2, 3), 0, 0);
        em_scope_end();
    }
    em_scope_begin();
    em_tensor *dst = em_zeros(EM_SHAPE(2, 3), EM_F32, EM_CPU);
    /* src overlapping dst: a view of dst itself, reversed */
    em_tensor *src = em_from_data(v, EM_F64, EM_SHAPE(2, 3), EM_F32, EM_CPU);
    em_copy_into(dst, src);
    CHECK(em_copy_into(dst, em_flip(dst, EM_AXES(0, 1))) == EM_OK, "from a view of itself");
    const double fv[6] = {-6.25, 5, 4, 3.5, -2, 1};
    h_check_tensor("from a flipped view of itself", dst, fv, EM_SHAPE(2, 3), 0, 0);
    CHECK(em_copy_into(dst, em_zeros(EM_SHAPE(3, 2), EM_F32, EM_CPU)) == EM_ERR_SHAPE, "shape");
    CHECK_ERR(EM_ERR_SHAPE, "em_copy_into: dst has shape [2, 3], src [3, 2]");
    CHECK(em_copy_into(em_transpose(dst, 0, 1), em_zeros(EM_SHAPE(3, 2), EM_F32, EM_CPU)) ==
              EM_ERR_INVALID_ARG,
          "a strided dst");
    CHECK_ERR(EM_ERR_INVALID_ARG, "dst must be contiguous");
    CHECK(em_copy_into(NULL, dst) == EM_ERR_INVALID_ARG, "NULL dst");
    CHECK_ERR(EM_ERR_INVALID_ARG, "dst");
    CHECK(em_copy_into(dst, NULL) == EM_ERR_INVALID_ARG, "NULL src");
    CHECK_ERR(EM_ERR_INVALID_ARG, "src");
    h_check_tensor("dst unchanged by the failures", dst, fv, EM_SHAPE(2, 3), 0, 0);
    em_scope_end();
}

int main(void)
{
    h_init();
    h_register_sim_backend();
    test_device(EM_CPU, "cpu");
    em_device sim = em_device_parse("sim:0");
    CHECK_OK("em_device_parse(\"sim:0\")");
    test_device(sim, "sim:0");
    test_errors();
    test_graphs_refused();
    test_copy_into();
    return h_finish();
}
