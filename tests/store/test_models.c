/* PyTorch compatibility of model files: a torchvision ResNet (ResNet-18 layout, narrow widths)
 * and a torch.nn.TransformerEncoder saved with torch.save load strictly by name into Ember
 * models built from Ember layers and give PyTorch's outputs (f32 and f64); an MLP written as
 * safetensors with plain struct/json, and as a DataParallel checkpoint, loads too.
 * Fixtures: scripts/fixtures_models.py. */
#include <string.h>
#include <unistd.h>

#include <ember/pt.h>
#include <ember/store.h>

#include "harness.h"

static char fixture_dir[512];

static const char *model_file(const char *name)
{
    static char buf[2][700];
    static int k;
    k ^= 1;
    snprintf(buf[k], sizeof buf[k], "%s/models/%s", fixture_dir, name);
    return buf[k];
}

/* ---- a ResNet from Ember layers, named like torchvision's --------------------------------- */

static em_module *conv(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t pad)
{
    return em_conv2d_new((em_conv2d_cfg){.in = in,
                                         .out = out,
                                         .kernel = {k, k},
                                         .stride = {stride, stride},
                                         .padding = {pad, pad},
                                         .no_bias = true},
                         EM_CPU);
}

static em_module *bn(int64_t c)
{
    return em_batch_norm2d_new((em_norm_cfg){.num_features = c}, EM_CPU);
}

/* torchvision's BasicBlock: relu(bn2(conv2(relu(bn1(conv1(x))))) + downsample(x)). */
static em_tensor *block_forward(em_module *m, em_tensor *const *in, int n)
{
    (void)n;
    em_module *ds = em_module_find(m, "downsample");
    em_scope_begin();
    em_tensor *h = em_forward(em_module_find(m, "conv1"), in[0]);
    h = em_relu(em_forward(em_module_find(m, "bn1"), h));
    h = em_forward(em_module_find(m, "bn2"), em_forward(em_module_find(m, "conv2"), h));
    em_tensor *id = ds ? em_forward(ds, in[0]) : in[0];
    em_tensor *y = em_keep(em_relu(em_add(h, id)));
    em_scope_end();
    return y;
}
static const em_module_type block_type = {"BasicBlock", block_forward, NULL, NULL};

static em_module *basic_block(int64_t in, int64_t out, int64_t stride)
{
    em_module *b = em_module_alloc(sizeof(em_module), &block_type, EM_CPU);
    em_module_child(b, "conv1", conv(in, out, 3, stride, 1));
    em_module_child(b, "bn1", bn(out));
    em_module_child(b, "relu", em_relu_new());
    em_module_child(b, "conv2", conv(out, out, 3, 1, 1));
    em_module_child(b, "bn2", bn(out));
    if (stride != 1 || in != out)
        em_module_child(b, "downsample",
                        em_sequential(EM_CPU, conv(in, out, 1, stride, 0), bn(out)));
    return b;
}

static em_tensor *resnet_forward(em_module *m, em_tensor *const *in, int n)
{
    (void)n;
    static const char *const order[] = {"conv1",  "bn1",    "relu",   "maxpool", "layer1",
                                        "layer2", "layer3", "layer4", "avgpool"};
    em_scope_begin();
    em_tensor *h = in[0];
    for (size_t i = 0; i < sizeof order / sizeof *order; i++)
        h = em_forward(em_module_find(m, order[i]), h);
    em_tensor *y = em_keep(em_forward(em_module_find(m, "fc"), em_flatten(h, 1, -1)));
    em_scope_end();
    return y;
}
static const em_module_type resnet_type = {"ResNet", resnet_forward, NULL, NULL};

static em_module *resnet(const int64_t widths[4], const int layers[4], int64_t classes)
{
    em_module *r = em_module_alloc(sizeof(em_module), &resnet_type, EM_CPU);
    em_module_child(r, "conv1", conv(3, widths[0], 7, 2, 3));
    em_module_child(r, "bn1", bn(widths[0]));
    em_module_child(r, "relu", em_relu_new());
    em_module_child(
        r, "maxpool",
        em_max_pool2d_new((em_pool2d_cfg){.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}}));
    int64_t in = widths[0];
    for (int s = 0; s < 4; s++) {
        em_module *stage = em_sequential_new(EM_CPU);
        for (int b = 0; b < layers[s]; b++) {
            em_sequential_push(stage, basic_block(in, widths[s], b == 0 && s > 0 ? 2 : 1));
            in = widths[s];
        }
        char name[16];
        snprintf(name, sizeof name, "layer%d", s + 1);
        em_module_child(r, name, stage);
    }
    em_module_child(r, "avgpool", em_adaptive_avg_pool2d_new(1, 1));
    em_module_child(r, "fc", em_linear_new(in, classes, EM_CPU));
    return r;
}

/* Loads strictly and prints the report when anything does not match. */
static bool load_strict(em_module *m, const char *file)
{
    em_load_report rep = {0};
    em_status st = em_module_load(m, model_file(file), NULL, &rep);
    if (st != EM_OK) {
        char *s = em_load_report_str(&rep);
        fprintf(stderr, "%s: %s\n%s", file, em_last_error(), s ? s : "");
        em_free(s);
    }
    CHECK(st == EM_OK, "%s loads strictly", file);
    CHECK_OK(file);
    CHECK(rep.missing.n == 0 && rep.unexpected.n == 0 && rep.mismatched.n == 0,
          "%s: every name matches", file);
    em_load_report_free(&rep);
    return st == EM_OK;
}

/* Eval forward in f32 (1e-5) and, after casting the model, in f64 (1e-10). */
static void check_forward(em_module *m, h_fixture *fx, const char *what, const char *xname,
                          const char *yname, em_tensor *(*fwd)(em_module *, em_tensor *))
{
    em_shape ys;
    const double *yv = h_fixture_values(fx, yname, &ys);
    em_tensor *x64 = h_fixture_tensor(fx, xname);
    if (!yv || !x64) return;
    em_module_train(m, false);
    em_no_grad_begin();
    em_tensor *x32 = em_cast(x64, EM_F32);
    em_tensor *y = fwd(m, x32);
    CHECK_OK(what);
    char label[100];
    snprintf(label, sizeof label, "%s f32", what);
    h_check_tensor(label, y, yv, ys, 1e-6, 1e-5);
    em_release(y);
    CHECK(em_module_cast(m, EM_F64) == EM_OK, "cast to f64");
    y = fwd(m, x64);
    snprintf(label, sizeof label, "%s f64", what);
    h_check_tensor(label, y, yv, ys, 1e-12, 1e-10);
    em_release(y);
    em_no_grad_end();
    em_release(x32);
    em_release(x64);
}

/* em_module_save of the loaded model writes exactly PyTorch's state_dict: the same names,
 * dtypes, shapes and bytes as the torch.save file (so safetensors.torch.load_file followed by
 * load_state_dict(strict=True) accepts it; checked once by hand with torchvision). */
static void same_as_torch(em_module *m, const char *pt)
{
    char path[600];
    snprintf(path, sizeof path, "%s/ember_models_%d.safetensors", P_tmpdir, (int)getpid());
    CHECK(em_module_save(m, path, NULL) == EM_OK, "save %s", pt);
    em_tensor_dict *ours = em_safetensors_load(path, NULL), *ref = em_pt_load(model_file(pt));
    CHECK_OK(pt);
    int64_t n = ref ? em_tensor_dict_count(ref) : -1, same = 0;
    for (int64_t i = 0; ours && i < n; i++) {
        const em_tensor *a = em_tensor_dict_tensor_at(ref, i);
        const em_tensor *b = em_tensor_dict_get(ours, em_tensor_dict_name_at(ref, i));
        if (!b || em_tensor_dtype(a) != em_tensor_dtype(b) ||
            !em_shape_equal(em_tensor_shape(a), em_tensor_shape(b)))
            continue;
        size_t sz = (size_t)em_tensor_numel(a) * em_dtype_size(em_tensor_dtype(a));
        if (memcmp(em_tensor_data(a), em_tensor_data(b), sz) == 0) same++;
    }
    CHECK(ours && n > 0 && em_tensor_dict_count(ours) == n && same == n,
          "%s: saved state_dict equals torch.save's (%lld/%lld)", pt, (long long)same,
          (long long)n);
    em_tensor_dict_free(ours);
    em_tensor_dict_free(ref);
    unlink(path);
}

static em_tensor *plain_forward(em_module *m, em_tensor *x)
{
    return em_forward(m, x);
}

static void test_resnet(h_fixture *fx)
{
    const int64_t widths[4] = {4, 8, 16, 32};
    const int layers[4] = {2, 2, 2, 2};
    em_module *net = resnet(widths, layers, 10);
    CHECK_OK("build ResNet");
    if (load_strict(net, "resnet_narrow.pt")) {
        em_tensor *nbt = em_module_get(net, "layer3.1.bn2.num_batches_tracked");
        CHECK(nbt && em_tensor_dtype(nbt) == EM_I64 && em_item_i64(nbt) == 3,
              "num_batches_tracked loaded (i64, 3)");
        em_tensor *w = em_module_get(net, "layer2.0.downsample.0.weight");
        CHECK(w && em_tensor_requires_grad(w), "loaded parameters stay trainable");
        same_as_torch(net, "resnet_narrow.pt");
        check_forward(net, fx, "ResNet", "resnet.x", "resnet.y", plain_forward);
    }
    em_module_free(net);
}

static em_tensor *encode(em_module *m, em_tensor *x)
{
    return em_transformer_encode(m, x, (em_transformer_masks){0});
}

static void test_transformer(h_fixture *fx)
{
    em_module *enc = em_transformer_encoder_new((em_transformer_cfg){.d_model = 16,
                                                                     .nhead = 2,
                                                                     .dim_feedforward = 32,
                                                                     .num_layers = 2,
                                                                     .final_norm = true,
                                                                     .seq_first = true},
                                                EM_CPU);
    CHECK_OK("build TransformerEncoder");
    if (load_strict(enc, "transformer.pt")) {
        same_as_torch(enc, "transformer.pt");
        check_forward(enc, fx, "TransformerEncoder", "tf.x", "tf.y", encode);
    }
    em_module_free(enc);
}

static em_module *mlp(void)
{
    return em_sequential(EM_CPU, em_linear_new(6, 8, EM_CPU), em_relu_new(),
                         em_linear_new(8, 3, EM_CPU));
}

static void test_mlp(h_fixture *fx)
{
    em_module *m = mlp();
    if (load_strict(m, "mlp.safetensors"))
        check_forward(m, fx, "MLP", "mlp.x", "mlp.y", plain_forward);
    em_module_free(m);

    /* DataParallel names inside {"epoch", "state_dict"}: the adapter strips "module.". */
    m = mlp();
    em_load_report rep = {0};
    CHECK(em_module_load(m, model_file("mlp_dp.pt"), NULL, &rep) == EM_OK, "DataParallel .pt");
    CHECK_OK("mlp_dp.pt");
    CHECK(rep.loaded.n == 4 && strcmp(rep.loaded.items[0].file_name, "module.0.weight") == 0 &&
              strcmp(rep.loaded.items[0].name, "0.weight") == 0,
          "module. prefix stripped");
    em_load_report_free(&rep);
    check_forward(m, fx, "MLP from DataParallel", "mlp.x", "mlp.y", plain_forward);
    em_module_free(m);

    /* Without adapters the same file does not match. */
    m = mlp();
    CHECK(em_module_load(m, model_file("mlp_dp.pt"), &(em_load_opts){.no_adapters = true}, &rep) ==
              EM_ERR_INVALID_ARG,
          "no adapters: strict failure");
    CHECK_ERR(EM_ERR_INVALID_ARG, "module.0.weight");
    CHECK(rep.missing.n == 4 && rep.unexpected.n == 4 && rep.loaded.n == 0, "report: 4 and 4");
    em_load_report_free(&rep);
    em_module_free(m);
}

int main(void)
{
    h_init();
    em_pt_register(); /* em_module_load reads .pt files too */
    const char *dir = getenv("EMBER_FIXTURES");
    snprintf(fixture_dir, sizeof fixture_dir, "%s", dir ? dir : "tests/fixtures");
    h_fixture *fx = h_fixture_load("models.emfx");
    CHECK(fx != NULL, "models.emfx");
    if (fx) {
        test_resnet(fx);
        test_transformer(fx);
        test_mlp(fx);
        h_fixture_free(fx);
    }
    return h_finish();
}
