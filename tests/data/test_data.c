/* Data layer tests: sources read correct values (fixtures written here at run time into a temp
 * dir: IDX plain/gzip, CSV, PNG, JPEG, SQLite, JSON), transforms, augmentations, and a loader
 * whose batches do not depend on the worker count. */
#include <math.h>
#include <png.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
/* after stdio.h */
#include <jpeglib.h>

#include "harness.h"

static char tmp[256];

static const char *tpath(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmp, name);
    return buf[k];
}

static void write_file(const char *path, const void *data, size_t n, bool gz)
{
    if (gz) {
        gzFile f = gzopen(path, "wb");
        gzwrite(f, data, (unsigned)n);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        fwrite(data, 1, n, f);
        fclose(f);
    }
}

/* ---- in-memory source and items ---------------------------------------------------------- */

static void test_memory(void)
{
    double xv[12];
    int64_t yv[4] = {3, 1, 4, 1};
    for (int i = 0; i < 12; i++) xv[i] = i * 0.5;
    em_tensor *x = em_from_f64(xv, EM_SHAPE(4, 3));
    em_tensor *y = em_from_i64(yv, EM_SHAPE(4));
    em_tensor *ts[2] = {x, y};
    const char *names[2] = {"x", "y"};
    em_dataset *ds = em_dataset_from_tensors(ts, names, 2);
    em_release(x);
    em_release(y);
    CHECK(ds && em_dataset_len(ds) == 4, "memory dataset length");
    em_item it;
    CHECK(em_dataset_get(ds, 2, &it) == EM_OK && it.n == 2, "get item 2");
    h_check_tensor("row 2", em_item_get(&it, "x"), (double[]){3.0, 3.5, 4.0}, EM_SHAPE(3), 0, 0);
    CHECK(em_item_get(&it, "y") == it.t[1], "label by name");
    CHECK(em_tensor_rank(it.t[1]) == 0 && em_item_i64(it.t[1]) == 4, "label value and rank 0");
    em_item_free(&it);
    CHECK(em_dataset_get(ds, -1, &it) == EM_OK && em_item_i64(it.t[1]) == 1, "negative index");
    em_item_free(&it);
    CHECK(em_dataset_get(ds, 4, &it) != EM_OK && it.n == 0, "out of range");
    CHECK_ERR(EM_ERR_INDEX, "index 4 outside");
    em_dataset_free(ds);

    /* made and freed inside a scope that holds the source tensor: nothing left behind (the
       dataset's reference was given back as the scope's, leaking the tensor) */
    int64_t live = em_live_tensors();
    em_scope_begin();
    em_tensor *z = em_zeros(EM_SHAPE(5, 2), EM_F32, EM_CPU);
    em_dataset *dz = em_dataset_from_tensors(&z, NULL, 1);
    CHECK(dz != NULL, "a dataset in a scope");
    em_dataset_free(dz);
    em_scope_end();
    CHECK(em_live_tensors() == live, "its tensor freed with the scope (%lld live, was %lld)",
          (long long)em_live_tensors(), (long long)live);
}

/* ---- transforms -------------------------------------------------------------------------- */

static em_dataset *range_ds(int64_t n)
{
    em_tensor *r = em_arange(0, (double)n, 1, EM_I64, EM_CPU);
    em_dataset *ds = em_dataset_from_tensors(&r, (const char *[]){"i"}, 1);
    em_release(r);
    return ds;
}

static int64_t idx_of(em_dataset *ds, int64_t i)
{
    em_item it;
    if (em_dataset_get(ds, i, &it) != EM_OK) return -1;
    int64_t v = em_item_i64(it.t[0]);
    em_item_free(&it);
    return v;
}

static void test_transforms(void)
{
    /* split: sizes, disjoint, covering */
    em_dataset *a, *b;
    CHECK(em_dataset_split(range_ds(10), 0.8, true, 5, &a, &b) == EM_OK, "split");
    CHECK(em_dataset_len(a) == 8 && em_dataset_len(b) == 2, "split sizes 8/2");
    int seen[10] = {0};
    for (int64_t i = 0; i < 8; i++) seen[idx_of(a, i)]++;
    for (int64_t i = 0; i < 2; i++) seen[idx_of(b, i)]++;
    bool all1 = true;
    for (int i = 0; i < 10; i++) all1 &= seen[i] == 1;
    CHECK(all1, "split parts partition the dataset");
    em_dataset_free(a);
    em_dataset_free(b);
    CHECK(em_dataset_split(range_ds(7), 0.5, false, 0, &a, &b) == EM_OK && em_dataset_len(a) == 4 &&
              em_dataset_len(b) == 3 && idx_of(b, 0) == 4,
          "unshuffled split rounds 3.5 up and keeps order");
    em_dataset_free(a);
    em_dataset_free(b);

    /* shuffle: a permutation, fixed by the seed */
    em_dataset *s1 = em_dataset_shuffle(range_ds(50), 9), *s2 = em_dataset_shuffle(range_ds(50), 9);
    int cnt[50] = {0};
    bool same = true, moved = false;
    for (int64_t i = 0; i < 50; i++) {
        int64_t v = idx_of(s1, i);
        cnt[v]++;
        same &= v == idx_of(s2, i);
        moved |= v != i;
    }
    bool perm = true;
    for (int i = 0; i < 50; i++) perm &= cnt[i] == 1;
    CHECK(perm && same && moved, "shuffle is a seeded permutation");
    em_dataset_free(s1);
    em_dataset_free(s2);

    /* sample without replacement: distinct; with replacement: uniform counts and repeats */
    em_dataset *w = em_dataset_sample(range_ds(20), 20, false, 3);
    int c20[20] = {0};
    for (int64_t i = 0; i < 20; i++) c20[idx_of(w, i)]++;
    perm = true;
    for (int i = 0; i < 20; i++) perm &= c20[i] == 1;
    CHECK(perm, "sample without replacement of all items is a permutation");
    em_dataset_free(w);
    em_dataset *r = em_dataset_sample(range_ds(10), 20000, true, 4);
    int c10[10] = {0};
    for (int64_t i = 0; i < 20000; i++) c10[idx_of(r, i)]++;
    bool unif = true;
    for (int i = 0; i < 10; i++) unif &= abs(c10[i] - 2000) < 200;
    CHECK(unif, "with replacement: each of 10 items drawn 2000 +- 200 times of 20000 (%d %d)",
          c10[0], c10[9]);
    em_dataset_free(r);
    CHECK(em_dataset_sample(range_ds(5), 6, false, 1) == NULL, "too many without replacement");
    CHECK_ERR(EM_ERR_INVALID_ARG, "without replacement");

    /* subset, take, concat */
    em_dataset *parts[2] = {em_dataset_subset(range_ds(10), 2, 3),
                            em_dataset_take(range_ds(10), (int64_t[]){9, -10}, 2)};
    em_dataset *cat = em_dataset_concat(parts, 2);
    CHECK(em_dataset_len(cat) == 5 && idx_of(cat, 0) == 2 && idx_of(cat, 2) == 4 &&
              idx_of(cat, 3) == 9 && idx_of(cat, 4) == 0,
          "subset + take concatenated");
    em_dataset_free(cat);

    /* sliding windows */
    em_tensor *seq = em_arange(0, 10, 1, EM_I64, EM_CPU);
    em_dataset *win = em_dataset_windows(seq, 3, 2);
    em_release(seq);
    CHECK(em_dataset_len(win) == 4, "windows: (10 - 3 - 1) / 2 + 1 = 4");
    em_item it;
    em_dataset_get(win, 1, &it);
    h_check_tensor("window x", em_item_get(&it, "x"), (double[]){2, 3, 4}, EM_SHAPE(3), 0, 0);
    h_check_tensor("window y", em_item_get(&it, "y"), (double[]){3, 4, 5}, EM_SHAPE(3), 0, 0);
    em_item_free(&it);
    em_dataset_get(win, 3, &it);
    h_check_tensor("last window y", it.t[1], (double[]){7, 8, 9}, EM_SHAPE(3), 0, 0);
    em_item_free(&it);
    em_dataset_free(win);
}

/* ---- augmentations ----------------------------------------------------------------------- */

static void test_augment(void)
{
    /* 1 x 2 x 3 image 1..6 */
    double v[6] = {1, 2, 3, 4, 5, 6};
    em_tensor *img = em_from_f64(v, EM_SHAPE(1, 1, 2, 3));
    em_dataset *ds = em_dataset_from_tensors(&img, NULL, 1);
    em_release(img);
    em_dataset *hf = em_dataset_random_flip(em_dataset_retain(ds), 0, 1.0, 0.0, 1);
    em_dataset *vf = em_dataset_random_flip(em_dataset_retain(ds), 0, 0.0, 1.0, 1);
    em_item it;
    em_dataset_get(hf, 0, &it);
    h_check_tensor("hflip", it.t[0], (double[]){3, 2, 1, 6, 5, 4}, EM_SHAPE(1, 2, 3), 0, 0);
    em_item_free(&it);
    em_dataset_get(vf, 0, &it);
    h_check_tensor("vflip", it.t[0], (double[]){4, 5, 6, 1, 2, 3}, EM_SHAPE(1, 2, 3), 0, 0);
    em_item_free(&it);
    em_dataset_free(hf);
    em_dataset_free(vf);

    /* crop with padding: window at (0, 0) of the image padded by 1 */
    em_dataset_get(ds, 0, &it);
    em_tensor *c = em_image_crop_pad(it.t[0], 0, 0, 2, 3, 1);
    h_check_tensor("crop pad", c, (double[]){0, 0, 0, 0, 1, 2}, EM_SHAPE(1, 2, 3), 0, 0);
    em_release(c);
    c = em_image_crop_pad(it.t[0], 2, 2, 2, 3, 1);
    h_check_tensor("crop pad bottom right", c, (double[]){5, 6, 0, 0, 0, 0}, EM_SHAPE(1, 2, 3), 0,
                   0);
    em_release(c);
    CHECK(em_image_crop_pad(it.t[0], 3, 0, 2, 3, 1) == NULL, "window outside the padded image");
    CHECK_ERR(EM_ERR_INDEX, "outside");
    /* affine: identity is exact; 90 degrees about the centre of a 3x3 image is a rotation */
    em_tensor *a = em_image_affine(it.t[0], 0, 0, 0, 1);
    h_check_tensor("affine identity", a, v, EM_SHAPE(1, 2, 3), 0, 0);
    em_release(a);
    em_item_free(&it);
    double q[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    em_tensor *sq = em_from_f64(q, EM_SHAPE(1, 3, 3));
    a = em_image_affine(sq, 90, 0, 0, 1);
    h_check_tensor("affine 90 degrees", a, (double[]){3, 6, 9, 2, 5, 8, 1, 4, 7}, EM_SHAPE(1, 3, 3),
                   1e-12, 0);
    em_release(a);
    a = em_image_affine(sq, 0, 1, 0, 1);
    h_check_tensor("affine shift right by 1", a, (double[]){0, 1, 2, 0, 4, 5, 0, 7, 8},
                   EM_SHAPE(1, 3, 3), 1e-12, 0);
    em_release(a);
    a = em_image_resize(sq, 6, 6);
    CHECK(a && em_tensor_dim(a, 1) == 6 && fabs(em_get_f64(a, (int64_t[]){0, 0, 0}) - 1) < 1e-12 &&
              fabs(em_get_f64(a, (int64_t[]){0, 1, 1}) - 2.0) < 1e-12,
          "bilinear resize (half-pixel centres)");
    em_release(a);
    em_release(sq);

    /* random crop equals crop_pad at some offset; deterministic per (epoch, index) */
    em_dataset *rc = em_dataset_random_crop(em_dataset_retain(ds), 0, 2, 3, 1, 11);
    em_item r0, r1, base;
    em_dataset_get_at(rc, 0, 5, &r0);
    em_dataset_get_at(rc, 0, 5, &r1);
    em_dataset_get(ds, 0, &base);
    bool found = false;
    em_scope_begin();
    for (int64_t t = 0; t <= 2 && !found; t++)
        for (int64_t l = 0; l <= 2 && !found; l++) {
            em_tensor *e = em_image_crop_pad(base.t[0], t, l, 2, 3, 1);
            em_tensor *eq = em_eq(e, r0.t[0]);
            found = em_item_i64(em_all(eq, EM_ALL, false)) != 0;
            em_release(eq);
            em_release(e);
        }
    CHECK(found, "random crop is a padded window");
    CHECK(em_item_i64(em_all(em_eq(r0.t[0], r1.t[0]), EM_ALL, false)), "random crop deterministic");
    em_scope_end();
    em_item_free(&r0);
    em_item_free(&r1);
    em_item_free(&base);
    em_dataset_free(rc);

    /* normalisation */
    em_dataset *nz =
        em_dataset_normalize(em_dataset_retain(ds), 0, (double[]){2}, (double[]){0.5}, 1);
    em_dataset_get(nz, 0, &it);
    h_check_tensor("normalize", it.t[0], (double[]){-2, 0, 2, 4, 6, 8}, EM_SHAPE(1, 2, 3), 0, 0);
    em_item_free(&it);
    em_dataset_free(nz);
    em_dataset_free(ds);

    /* per-channel on 2 channels, f32 input stays f32 */
    float f[8] = {0, 1, 2, 3, 10, 10, 10, 10};
    em_tensor *t2 = em_from_f32(f, EM_SHAPE(1, 2, 2, 2));
    ds = em_dataset_from_tensors(&t2, NULL, 1);
    em_release(t2);
    nz = em_dataset_normalize(ds, 0, (double[]){1, 10}, (double[]){2, 5}, 2);
    em_dataset_get(nz, 0, &it);
    CHECK(em_tensor_dtype(it.t[0]) == EM_F32, "normalize keeps f32");
    h_check_tensor("normalize per channel", it.t[0], (double[]){-0.5, 0, 0.5, 1, 0, 0, 0, 0},
                   EM_SHAPE(2, 2, 2), 0, 0);
    em_item_free(&it);
    em_dataset_free(nz);
}

/* ---- loader ------------------------------------------------------------------------------ */

static int fail_at = -1;

static em_status add_index(em_item *item, int64_t index, int64_t epoch, void *user)
{
    if (index == fail_at)
        return em_error(EM_ERR_FORMAT, "test map: item %lld is bad", (long long)index);
    /* a per-item random extra field from (seed, epoch, index) */
    double u = em_data_uniform(77, epoch, index, 0);
    return em_item_push(item, "u", em_scalar(u, EM_F64, EM_CPU));
}

static em_dataset *aug_ds(int64_t n)
{
    em_seed(1);
    em_tensor *img = em_rand(EM_SHAPE(n, 1, 6, 6), EM_F32, EM_CPU);
    em_tensor *lab = em_arange(0, (double)n, 1, EM_I32, EM_CPU);
    em_tensor *ts[2] = {img, lab};
    em_dataset *ds = em_dataset_from_tensors(ts, (const char *[]){"image", "label"}, 2);
    em_release(img);
    em_release(lab);
    ds = em_dataset_random_crop(ds, 0, 6, 6, 1, 1);
    ds = em_dataset_random_flip(ds, 0, 0.5, 0.5, 2);
    ds = em_dataset_random_affine(
        ds, 0, (em_affine_cfg){.degrees = 10, .translate = 0.1, .scale_min = 0.9, .scale_max = 1.1},
        3);
    return em_dataset_map(ds, add_index, NULL, NULL);
}

/* All values of `epochs` epochs, flattened, into a malloc'd array. */
static double *run_loader(int workers, int epochs, int64_t *count, int64_t *labels_first)
{
    em_loader *l = em_loader_new(aug_ds(37), (em_loader_cfg){.batch_size = 5,
                                                             .shuffle = true,
                                                             .seed = 42,
                                                             .workers = workers,
                                                             .prefetch = workers ? 3 : 0});
    double *all = malloc(sizeof(double) * 40000);
    int64_t n = 0;
    for (int e = 0; e < epochs; e++) {
        em_batch b;
        int64_t k = 0;
        while (em_loader_next(l, &b)) {
            CHECK(b.index == k && b.epoch == e, "batch %lld of epoch %d in order", (long long)k, e);
            CHECK(em_tensor_dtype(em_batch_get(&b, "label")) == EM_I64, "labels are i64");
            for (int f = 0; f < b.n; f++) {
                int64_t m = em_tensor_numel(b.t[f]);
                em_to_data(b.t[f], all + n, EM_F64, m);
                if (f == 1 && k == 0 && labels_first) labels_first[e] = (int64_t)all[n];
                n += m;
            }
            em_batch_free(&b);
            k++;
        }
        CHECK_OK("loader epoch");
        CHECK(k == 8, "37 items in batches of 5: 8 batches (got %lld)", (long long)k);
    }
    em_loader_free(l);
    *count = n;
    return all;
}

static void test_loader(void)
{
    int64_t n0, lab0[2], lab[2];
    double *ref = run_loader(0, 2, &n0, lab0);
    int wk[3] = {1, 2, 4};
    for (int i = 0; i < 3; i++) {
        int64_t n;
        double *got = run_loader(wk[i], 2, &n, lab);
        CHECK(n == n0 && memcmp(got, ref, (size_t)n * sizeof *got) == 0,
              "%d workers give the same batches as 0", wk[i]);
        free(got);
    }
    CHECK(lab0[0] != lab0[1] || memcmp(ref, ref + n0 / 2, (size_t)(n0 / 2) * sizeof *ref) != 0,
          "epoch 1 is reshuffled and re-augmented");
    free(ref);

    /* no shuffle, drop_last, progress */
    em_loader *l = em_loader_new(range_ds(37),
                                 (em_loader_cfg){.batch_size = 5, .drop_last = true, .workers = 2});
    CHECK(em_loader_num_batches(l) == 7, "drop_last: 7 batches");
    em_batch b;
    int64_t k = 0;
    while (em_loader_next(l, &b)) {
        CHECK(b.size == 5 && em_get_f64(b.t[0], (int64_t[]){0}) == (double)(5 * k),
              "batch %lld starts at %lld", (long long)k, (long long)5 * k);
        em_batch_free(&b);
        k++;
        if (k == 3) {
            em_loader_progress p = em_loader_get_progress(l);
            CHECK(p.batches_done == 3 && p.items_done == 15 && p.items_total == 35, "progress");
        }
    }
    CHECK(k == 7, "7 batches");
    em_loader_free(l);
    l = em_loader_new(range_ds(37), (em_loader_cfg){.batch_size = 5});
    for (k = 0; em_loader_next(l, &b); k++) {
        if (k == 7) CHECK(b.size == 2, "last batch holds the 2 left over");
        em_batch_free(&b);
    }
    CHECK(k == 8, "8 batches without drop_last");
    em_loader_free(l);

    /* early stop: free with batches in flight; reset mid-epoch */
    l = em_loader_new(aug_ds(37), (em_loader_cfg){.batch_size = 4, .workers = 4, .shuffle = true});
    CHECK(em_loader_next(l, &b), "first batch");
    em_batch_free(&b);
    em_loader_reset(l, 3);
    CHECK(em_loader_next(l, &b) && b.epoch == 3 && b.index == 0, "reset to epoch 3");
    em_batch_free(&b);
    em_loader_free(l);

    /* an error on a worker reaches the caller, in order */
    fail_at = 13;
    for (int w = 0; w <= 2; w += 2) {
        l = em_loader_new(aug_ds(37), (em_loader_cfg){.batch_size = 5, .workers = w});
        for (k = 0; em_loader_next(l, &b); k++) em_batch_free(&b);
        CHECK(k == 2, "%d workers: batches 0 and 1 arrive before the bad one (got %lld)", w,
              (long long)k);
        CHECK_ERR(EM_ERR_FORMAT, "item 13 is bad");
        em_loader_free(l);
    }
    fail_at = -1;

    /* scopes: a batch built inline survives the caller's scope */
    l = em_loader_new(range_ds(4), (em_loader_cfg){.batch_size = 2});
    em_scope_begin();
    em_loader_next(l, &b);
    em_scope_end();
    CHECK(em_tensor_numel(b.t[0]) == 2, "batch outlives a scope");
    em_batch_free(&b);
    em_loader_free(l);
}

/* ---- file sources ------------------------------------------------------------------------ */

static void test_csv(void)
{
    const char *csv = "a,b,label\n1,2,0\n\n3.5,-4e1,1\r\n";
    write_file(tpath("t.csv"), csv, strlen(csv), false);
    em_dataset *ds = em_dataset_csv(tpath("t.csv"), (em_csv_cfg){.label = true, .label_col = -1});
    CHECK(ds && em_dataset_len(ds) == 2, "csv rows (header auto-detected, blank line skipped)");
    em_item it;
    em_dataset_get(ds, 1, &it);
    CHECK(em_tensor_dtype(it.t[0]) == EM_F32 && em_tensor_dtype(it.t[1]) == EM_I64, "csv dtypes");
    h_check_tensor("csv row", it.t[0], (double[]){3.5, -40}, EM_SHAPE(2), 0, 0);
    CHECK(em_item_i64(it.t[1]) == 1, "csv label");
    em_item_free(&it);
    em_dataset_free(ds);

    /* gzip, blank-separated, no label, f64, label in column 0 */
    const char *sp = "  7 8  9\n10 11 12\n";
    write_file(tpath("s.txt.gz"), sp, strlen(sp), true);
    ds = em_dataset_csv(tpath("s.txt.gz"),
                        (em_csv_cfg){.delimiter = ' ', .label = true, .f64 = true});
    em_dataset_get(ds, 0, &it);
    CHECK(em_item_i64(it.t[1]) == 7, "label column 0");
    h_check_tensor("gz csv", it.t[0], (double[]){8, 9}, EM_SHAPE(2), 0, 0);
    em_item_free(&it);
    em_dataset_free(ds);

    const char *bad = "1,2\n3,x4\n";
    write_file(tpath("bad.csv"), bad, strlen(bad), false);
    CHECK(em_dataset_csv(tpath("bad.csv"), (em_csv_cfg){0}) == NULL, "bad cell");
    CHECK_ERR(EM_ERR_FORMAT, "line 2 column 2: \"x4\" is not a number");
    const char *ragged = "1,2\n3\n";
    write_file(tpath("rag.csv"), ragged, strlen(ragged), false);
    CHECK(em_dataset_csv(tpath("rag.csv"), (em_csv_cfg){0}) == NULL, "ragged");
    CHECK_ERR(EM_ERR_FORMAT, "line 2 has 1 columns, expected 2");
    const char *fl = "1,2.5\n";
    write_file(tpath("fl.csv"), fl, strlen(fl), false);
    CHECK(em_dataset_csv(tpath("fl.csv"), (em_csv_cfg){.label = true, .label_col = 1}) == NULL,
          "non-integer label");
    CHECK_ERR(EM_ERR_FORMAT, "not an integer");
    CHECK(em_dataset_csv(tpath("missing.csv"), (em_csv_cfg){0}) == NULL, "missing file");
    CHECK_ERR(EM_ERR_IO, "missing.csv");
}

static void test_idx(void)
{
    unsigned char im[16 + 12] = {0, 0, 8, 3, 0, 0, 0, 3, 0, 0, 0, 2, 0, 0, 0, 2};
    for (int i = 0; i < 12; i++) im[16 + i] = (unsigned char)(i * 20);
    unsigned char lb[8 + 3] = {0, 0, 8, 1, 0, 0, 0, 3, 7, 0, 9};
    write_file(tpath("im.idx"), im, sizeof im, false);
    write_file(tpath("im.idx.gz"), im, sizeof im, true);
    write_file(tpath("lb.idx.gz"), lb, sizeof lb, true);
    em_tensor *t = em_idx_read(tpath("im.idx"));
    CHECK(t && em_tensor_dtype(t) == EM_U8 && em_tensor_rank(t) == 3, "idx u8 [3,2,2]");
    CHECK(t && em_get_f64(t, (int64_t[]){2, 1, 1}) == 220, "idx value");
    em_release(t);
    em_dataset *ds = em_dataset_idx(tpath("im.idx.gz"), tpath("lb.idx.gz"), (em_idx_cfg){0});
    CHECK(ds && em_dataset_len(ds) == 3, "idx dataset");
    em_item it;
    em_dataset_get(ds, 1, &it);
    h_check_tensor("idx image / 255", em_item_get(&it, "image"),
                   (double[]){80 / 255.0, 100 / 255.0, 120 / 255.0, 140 / 255.0}, EM_SHAPE(1, 2, 2),
                   1e-7, 0);
    CHECK(em_item_i64(em_item_get(&it, "label")) == 0, "idx label");
    em_item_free(&it);
    em_dataset_free(ds);

    /* i32 big-endian */
    unsigned char i32[8 + 8] = {0, 0, 0x0C, 1, 0, 0, 0, 2, 0, 0, 1, 2, 0xFF, 0xFF, 0xFF, 0xFE};
    write_file(tpath("i32.idx"), i32, sizeof i32, false);
    t = em_idx_read(tpath("i32.idx"));
    CHECK(t && em_tensor_dtype(t) == EM_I32, "idx i32");
    if (t) h_check_tensor("idx big-endian i32", t, (double[]){258, -2}, EM_SHAPE(2), 0, 0);
    em_release(t);

    write_file(tpath("trunc.idx"), im, sizeof im - 1, false);
    CHECK(em_idx_read(tpath("trunc.idx")) == NULL, "truncated idx");
    CHECK_ERR(EM_ERR_FORMAT, "truncated: header [3, 2, 2] of u8 needs 12 data bytes, found 11");
    unsigned char magic[16];
    memcpy(magic, im, 16);
    magic[0] = 0x1f;
    write_file(tpath("magic.idx"), magic, sizeof magic, false);
    CHECK(em_idx_read(tpath("magic.idx")) == NULL, "wrong magic");
    CHECK_ERR(EM_ERR_FORMAT, "is not an IDX file");
    magic[0] = 0;
    magic[2] = 0x07;
    write_file(tpath("type.idx"), magic, sizeof magic, false);
    CHECK(em_idx_read(tpath("type.idx")) == NULL, "bad type code");
    CHECK_ERR(EM_ERR_FORMAT, "unknown IDX type code 0x07");
    /* a gzip stream cut short */
    FILE *f = fopen(tpath("im.idx.gz"), "rb");
    unsigned char gz[256];
    size_t n = fread(gz, 1, sizeof gz, f);
    fclose(f);
    write_file(tpath("cut.idx.gz"), gz, n - 10, false);
    CHECK(em_idx_read(tpath("cut.idx.gz")) == NULL, "truncated gzip");
    CHECK(em_last_status() == EM_ERR_FORMAT, "truncated gzip is a format error: %s",
          em_last_error());
    em_clear_error();
}

static void test_mnist_json(void)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/digits", tmp);
    mkdir(dir, 0700);
    for (int c = 0; c < 10; c++) {
        char p[600];
        snprintf(p, sizeof p, "%s/%d.json", dir, c);
        FILE *f = fopen(p, "w");
        fprintf(f, "{\"data\": [");
        int imgs = c == 3 ? 2 : 1;
        for (int i = 0; i < imgs * 784; i++)
            fprintf(f, "%s%g", i ? "," : "", i == 5 ? 0.125 * c : 0);
        fprintf(f, "]}");
        fclose(f);
    }
    em_dataset *ds = em_dataset_mnist_json(dir, (em_idx_cfg){.flatten = true});
    CHECK(ds && em_dataset_len(ds) == 11, "mnist json: 11 digits");
    em_item it;
    em_dataset_get(ds, 5, &it); /* 0, 1, 2, 3, 3, 4 */
    CHECK(em_item_i64(it.t[1]) == 4 && em_tensor_numel(it.t[0]) == 784 &&
              em_get_f64(it.t[0], (int64_t[]){5}) == 0.5,
          "mnist json item 5 is a 4");
    em_item_free(&it);
    em_dataset_free(ds);
}

static void write_png(const char *path, const unsigned char *rgb, int w, int h)
{
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    im.width = (png_uint_32)w;
    im.height = (png_uint_32)h;
    im.format = PNG_FORMAT_RGB;
    png_image_write_to_file(&im, path, 0, rgb, 0, NULL);
}

static void write_jpeg(const char *path, const unsigned char *rgb, int w, int h)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    FILE *f = fopen(path, "wb");
    jpeg_stdio_dest(&c, f);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 100, TRUE);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(rgb + (size_t)c.next_scanline * (size_t)w * 3);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    fclose(f);
    jpeg_destroy_compress(&c);
}

static void test_images(void)
{
    char d[512];
    snprintf(d, sizeof d, "%s/img", tmp);
    mkdir(d, 0700);
    snprintf(d, sizeof d, "%s/img/cat", tmp);
    mkdir(d, 0700);
    snprintf(d, sizeof d, "%s/img/dog", tmp);
    mkdir(d, 0700);
    unsigned char px[4 * 3 * 3];
    for (int i = 0; i < 36; i++) px[i] = (unsigned char)(i * 7);
    write_png(tpath("img/cat/a.png"), px, 4, 3);
    unsigned char flat[16 * 16 * 3];
    for (int i = 0; i < 16 * 16; i++)
        flat[3 * i] = 200, flat[3 * i + 1] = 100, flat[3 * i + 2] = 50;
    write_jpeg(tpath("img/dog/b.jpg"), flat, 16, 16);
    write_file(tpath("img/dog/notes.txt"), "x", 1, false);

    em_tensor *t = em_image_read(tpath("img/cat/a.png"), (em_image_cfg){.raw_u8 = true});
    CHECK(t && em_tensor_dim(t, 0) == 3 && em_tensor_dim(t, 1) == 3 && em_tensor_dim(t, 2) == 4,
          "png [3, 3, 4]");
    /* channel c, row y, col x = px[(y*4 + x)*3 + c] */
    CHECK(t && em_get_f64(t, (int64_t[]){1, 2, 3}) == px[(2 * 4 + 3) * 3 + 1], "png pixel exact");
    em_release(t);
    t = em_image_read(tpath("img/dog/b.jpg"), (em_image_cfg){0});
    CHECK(t && em_tensor_dtype(t) == EM_F32 &&
              fabs(em_get_f64(t, (int64_t[]){0, 5, 5}) - 200 / 255.0) < 4 / 255.0 &&
              fabs(em_get_f64(t, (int64_t[]){2, 9, 3}) - 50 / 255.0) < 4 / 255.0,
          "jpeg colours within 4 levels");
    em_release(t);
    t = em_image_read(tpath("img/dog/b.jpg"), (em_image_cfg){.channels = 1});
    CHECK(t && em_tensor_dim(t, 0) == 1, "jpeg as grey");
    em_release(t);

    em_dataset *ds = em_dataset_image_folder(tpath("img"), (em_image_cfg){.height = 8, .width = 8});
    CHECK(ds && em_dataset_len(ds) == 2 && em_image_folder_classes(ds) == 2 &&
              strcmp(em_image_folder_class(ds, 1), "dog") == 0,
          "image folder: 2 classes, txt ignored");
    em_loader *l = em_loader_new(ds, (em_loader_cfg){.batch_size = 2, .workers = 1});
    em_batch b;
    CHECK(em_loader_next(l, &b), "image batch");
    CHECK(em_tensor_dim(b.t[0], 0) == 2 && em_tensor_dim(b.t[0], 3) == 8, "batch [2, 3, 8, 8]");
    h_check_tensor("image labels", em_batch_get(&b, "label"), (double[]){0, 1}, EM_SHAPE(2), 0, 0);
    em_batch_free(&b);
    em_loader_free(l);

    write_file(tpath("fake.png"), "\x89PNG\r\n\x1a\nxx", 10, false);
    CHECK(em_image_read(tpath("fake.png"), (em_image_cfg){0}) == NULL, "bad png");
    CHECK_ERR(EM_ERR_FORMAT, "fake.png");
    write_file(tpath("fake.jpg"), "\xff\xd8\xff\xe0", 4, false);
    CHECK(em_image_read(tpath("fake.jpg"), (em_image_cfg){0}) == NULL, "bad jpeg");
    CHECK_ERR(EM_ERR_FORMAT, "fake.jpg");
}

static void test_sqlite(void)
{
    double v[6] = {1, 2.5, 0, 3, -1, 1};
    em_tensor *rows = em_from_f64(v, EM_SHAPE(2, 3));
    CHECK(em_sqlite_write(tpath("d.db"), "pts", (const char *[]){"x", "y", "class"}, rows) == EM_OK,
          "sqlite write");
    CHECK(em_sqlite_write(tpath("d.db"), "pts", NULL, rows) == EM_OK, "append");
    em_release(rows);
    em_dataset *ds = em_dataset_sqlite(tpath("d.db"), "SELECT x, y, class FROM pts WHERE x > 0",
                                       (em_csv_cfg){.label = true, .label_col = 2});
    CHECK(ds && em_dataset_len(ds) == 4, "sqlite rows");
    em_item it;
    em_dataset_get(ds, 1, &it);
    h_check_tensor("sqlite x", it.t[0], (double[]){3, -1}, EM_SHAPE(2), 0, 0);
    CHECK(em_item_i64(it.t[1]) == 1, "sqlite label");
    em_item_free(&it);
    em_dataset_free(ds);
    CHECK(em_dataset_sqlite(tpath("d.db"), "SELECT nope FROM pts", (em_csv_cfg){0}) == NULL,
          "bad query");
    CHECK_ERR(EM_ERR_FORMAT, "no such column");
}

static void test_text(void)
{
    const char *s = "hello\nw\xc3\xa9rld\n\nab";
    em_text *t = em_text_from_string(s, strlen(s));
    CHECK(em_text_len(t) == 15, "15 characters (one of two bytes)");
    /* distinct: \n a b d e h l o r w é = 11 */
    CHECK(em_text_vocab_size(t) == 11 && em_text_char_id(t, '\n') == 0 &&
              em_text_char(t, 10) == 0xE9,
          "sorted vocabulary");
    em_tensor *tok = em_text_tokens(t);
    char out[64];
    em_text_decode(t, tok, out, sizeof out);
    CHECK(strcmp(out, s) == 0, "decode round trip");
    em_release(tok);
    em_dataset *ds = em_dataset_text_lines(t);
    CHECK(em_dataset_len(ds) == 3, "3 non-empty lines");
    em_item it;
    em_dataset_get(ds, 1, &it);
    em_text_decode(t, it.t[0], out, sizeof out);
    CHECK(strcmp(out, "w\xc3\xa9rld") == 0, "line 1");
    em_item_free(&it);
    em_dataset_free(ds);
    em_text_free(t);
}

static void test_fashion_mnist(void)
{
    const char *d = "/usr/share/datasets/fashion-mnist";
    char p[256], q[256];
    snprintf(p, sizeof p, "%s/t10k-labels-idx1-ubyte.gz", d);
    if (access(p, R_OK) != 0) {
        printf("fashion-mnist not installed: skipped\n");
        return;
    }
    snprintf(q, sizeof q, "%s/t10k-images-idx3-ubyte.gz", d);
    em_dataset *ds = em_dataset_idx(q, p, (em_idx_cfg){0});
    CHECK(ds && em_dataset_len(ds) == 10000, "fashion-mnist t10k: 10000");
    int64_t want[10] = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7};
    em_loader *l = em_loader_new(ds, (em_loader_cfg){.batch_size = 10, .workers = 2});
    em_batch b;
    CHECK(em_loader_next(l, &b), "first batch");
    double w[10];
    for (int i = 0; i < 10; i++) w[i] = (double)want[i];
    h_check_tensor("first labels", em_batch_get(&b, "label"), w, EM_SHAPE(10), 0, 0);
    em_tensor *s = em_sum(em_select(b.t[0], 0, 0), EM_ALL, false);
    CHECK(fabs(em_item_f64(s) - 33456 / 255.0) < 1e-3, "first image pixel sum");
    em_batch_free(&b);
    em_loader_free(l);
}

/* Readers refuse FIFOs and directories at once instead of blocking on them. */
static void test_special_files(void)
{
    char fifo[300];
    snprintf(fifo, sizeof fifo, "%s/fifo", tmp);
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    const char *paths[2] = {fifo, tmp};
    const char *kinds[2] = {"a FIFO", "a directory"};
    for (int i = 0; i < 2; i++) {
        CHECK(em_idx_read(paths[i]) == NULL, "idx from %s", kinds[i]);
        CHECK_ERR(EM_ERR_IO, kinds[i]);
        CHECK(em_image_read(paths[i], (em_image_cfg){0}) == NULL, "image from %s", kinds[i]);
        CHECK_ERR(EM_ERR_IO, kinds[i]);
        CHECK(em_dataset_csv(paths[i], (em_csv_cfg){0}) == NULL, "csv from %s", kinds[i]);
        CHECK_ERR(EM_ERR_IO, kinds[i]);
        CHECK(em_dataset_sqlite(paths[i], "select 1", (em_csv_cfg){0}) == NULL, "sqlite from %s",
              kinds[i]);
        CHECK_ERR(EM_ERR_IO, kinds[i]);
        CHECK(em_config_load_file(paths[i]) != EM_OK, "config from %s", kinds[i]);
        CHECK_ERR(EM_ERR_IO, kinds[i]);
    }
    unlink(fifo);
}

int main(void)
{
    h_init();
    snprintf(tmp, sizeof tmp, "/tmp/ember_data_XXXXXX");
    if (!mkdtemp(tmp)) return 1;
    em_scope_begin();
    em_scope_end();
    test_memory();
    test_transforms();
    test_augment();
    test_loader();
    test_csv();
    test_idx();
    test_mnist_json();
    test_images();
    test_sqlite();
    test_text();
    test_special_files();
    em_scope_begin();
    test_fashion_mnist();
    em_scope_end();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd) != 0) printf("could not remove %s\n", tmp);
    return h_finish();
}
