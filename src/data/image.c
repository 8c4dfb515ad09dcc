/* Images: PNG (libpng) and JPEG (libjpeg) decoding, the class-per-folder dataset, and the
 * deterministic augmentations (crop with padding, flips, affine, normalisation, resize). */
#include "../core/file_open.h"
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
/* after stdio.h: jpeglib.h uses FILE */
#include <jpeglib.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "data_impl.h"

/* ---- decoding ---------------------------------------------------------------------------- */

/* A decoded image may take at most IMAGE_MAX_RATIO times its file's bytes (deflate and JPEG's
 * entropy coding expand about a thousand times at most), or IMAGE_MIN_BYTES: a 150-byte JPEG
 * declaring 90000 x 90000 pixels, which libjpeg would fill in from nothing, is refused before
 * anything is allocated. */
#define IMAGE_MAX_RATIO 1024
#define IMAGE_MIN_BYTES ((uint64_t)64 << 20)

static bool decoded_size_ok(const char *path, uint64_t file_bytes, uint64_t h, uint64_t w, int ch)
{
    uint64_t bytes, limit;
    if (__builtin_mul_overflow(file_bytes, (uint64_t)IMAGE_MAX_RATIO, &limit)) limit = UINT64_MAX;
    if (limit < IMAGE_MIN_BYTES) limit = IMAGE_MIN_BYTES;
    if (!__builtin_mul_overflow(h, w, &bytes) &&
        !__builtin_mul_overflow(bytes, (uint64_t)ch, &bytes) && bytes <= limit)
        return true;
    em_error(EM_ERR_FORMAT,
             "em_image_read: %s: a %llux%llu image from a %llu-byte file would decode to more "
             "than %llu bytes (a decompression bomb?)",
             path, (unsigned long long)w, (unsigned long long)h, (unsigned long long)file_bytes,
             (unsigned long long)limit);
    return false;
}

static unsigned char *png_decode(const char *path, uint64_t file_bytes, int ch, int64_t *h,
                                 int64_t *w)
{
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&im, path)) {
        em_error(EM_ERR_FORMAT, "em_image_read: %s: %s", path, im.message);
        return NULL;
    }
    if (!decoded_size_ok(path, file_bytes, im.height, im.width, ch)) {
        png_image_free(&im);
        return NULL;
    }
    im.format = ch == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
    size_t n = PNG_IMAGE_SIZE(im);
    unsigned char *buf = malloc(n ? n : 1);
    if (!buf) {
        png_image_free(&im);
        em_error(EM_ERR_OOM, "em_image_read: %s: out of memory", path);
        return NULL;
    }
    if (!png_image_finish_read(&im, NULL, buf, 0, NULL)) {
        em_error(EM_ERR_FORMAT, "em_image_read: %s: %s", path, im.message);
        free(buf);
        png_image_free(&im);
        return NULL;
    }
    *h = im.height;
    *w = im.width;
    png_image_free(&im);
    return buf;
}

typedef struct jerr {
    struct jpeg_error_mgr mgr;
    jmp_buf jb;
} jerr;

static void jpeg_fail(j_common_ptr c)
{
    longjmp(((jerr *)c->err)->jb, 1);
}

/* The image file for reading (regular files only), or NULL with the error recorded. */
static FILE *open_image(const char *path)
{
    const char *why;
    int fd = core_open_regular(path, NULL, &why);
    FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
    if (f) return f;
    if (fd >= 0) {
        why = strerror(errno);
        close(fd);
    }
    em_error(EM_ERR_IO, "em_image_read: cannot open %s: %s", path, why);
    return NULL;
}

/* The library never prints: libjpeg's warnings are dropped. */
static void jpeg_quiet(j_common_ptr c)
{
    (void)c;
}

static unsigned char *jpeg_decode(const char *path, uint64_t file_bytes, int ch, int64_t *h,
                                  int64_t *w)
{
    FILE *f = open_image(path);
    if (!f) return NULL;
    struct jpeg_decompress_struct d;
    jerr e;
    unsigned char *volatile buf = NULL;
    d.err = jpeg_std_error(&e.mgr);
    e.mgr.error_exit = jpeg_fail;
    e.mgr.output_message = jpeg_quiet;
    if (setjmp(e.jb)) {
        char msg[JMSG_LENGTH_MAX];
        e.mgr.format_message((j_common_ptr)&d, msg);
        em_error(EM_ERR_FORMAT, "em_image_read: %s: %s", path, msg);
        jpeg_destroy_decompress(&d);
        fclose(f);
        free(buf);
        return NULL;
    }
    jpeg_create_decompress(&d);
    jpeg_stdio_src(&d, f);
    jpeg_read_header(&d, TRUE);
    if (!decoded_size_ok(path, file_bytes, d.image_height, d.image_width, ch)) {
        jpeg_destroy_decompress(&d);
        fclose(f);
        return NULL;
    }
    d.out_color_space = ch == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_start_decompress(&d);
    size_t stride = (size_t)d.output_width * (size_t)d.output_components;
    buf = malloc(stride * d.output_height + 1);
    if (!buf) {
        jpeg_destroy_decompress(&d);
        fclose(f);
        em_error(EM_ERR_OOM, "em_image_read: %s: out of memory", path);
        return NULL;
    }
    while (d.output_scanline < d.output_height) {
        JSAMPROW row = buf + stride * d.output_scanline;
        jpeg_read_scanlines(&d, &row, 1);
    }
    *h = d.output_height;
    *w = d.output_width;
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    fclose(f);
    return buf;
}

em_tensor *em_image_read(const char *path, em_image_cfg cfg)
{
    if (!path) {
        em_error(EM_ERR_INVALID_ARG, "em_image_read: path is NULL");
        return NULL;
    }
    int ch = cfg.channels == 1 ? 1 : 3;
    if (cfg.channels != 0 && cfg.channels != 1 && cfg.channels != 3) {
        em_error(EM_ERR_INVALID_ARG, "em_image_read: channels %d (0, 1 or 3)", cfg.channels);
        return NULL;
    }
    unsigned char magic[4] = {0};
    FILE *f = open_image(path);
    if (!f) return NULL;
    size_t got = fread(magic, 1, 4, f);
    struct stat st;
    uint64_t file_bytes = fstat(fileno(f), &st) == 0 ? (uint64_t)st.st_size : 0;
    fclose(f);
    int64_t h = 0, w = 0;
    unsigned char *px;
    if (got >= 4 && magic[0] == 0x89 && magic[1] == 'P' && magic[2] == 'N' && magic[3] == 'G') {
        px = png_decode(path, file_bytes, ch, &h, &w);
    } else if (got >= 2 && magic[0] == 0xFF && magic[1] == 0xD8) {
        px = jpeg_decode(path, file_bytes, ch, &h, &w);
    } else {
        em_error(EM_ERR_FORMAT, "em_image_read: %s is neither PNG nor JPEG", path);
        return NULL;
    }
    if (!px) return NULL;
    /* HWC bytes -> [C, H, W] */
    em_tensor *t = em_empty(EM_SHAPE(ch, h, w), cfg.raw_u8 ? EM_U8 : EM_F32, EM_CPU);
    if (t) {
        int64_t hw = h * w;
        if (cfg.raw_u8) {
            unsigned char *d = em_tensor_data(t);
            for (int64_t i = 0; i < hw; i++)
                for (int c = 0; c < ch; c++) d[c * hw + i] = px[i * ch + c];
        } else {
            float *d = em_tensor_data(t);
            for (int64_t i = 0; i < hw; i++)
                for (int c = 0; c < ch; c++) d[c * hw + i] = (float)(px[i * ch + c] / 255.0);
        }
    }
    free(px);
    if (t && cfg.height > 0 && cfg.width > 0 && (cfg.height != h || cfg.width != w)) {
        em_tensor *r = em_image_resize(t, cfg.height, cfg.width);
        em_release(t);
        t = r;
    }
    return t;
}

/* ---- image folder ------------------------------------------------------------------------ */

typedef struct dt_folder {
    em_dataset base;
    em_image_cfg cfg;
    int nclass;
    char **classes;
    int64_t n;
    char **paths;
    int64_t *labels;
} dt_folder;

static int64_t folder_len(em_dataset *ds)
{
    return ((dt_folder *)ds)->n;
}

static em_status folder_get(em_dataset *ds, int64_t i, int64_t epoch, em_item *out)
{
    dt_folder *f = (dt_folder *)ds;
    em_status s = em_item_push(out, "image", em_image_read(f->paths[i], f->cfg));
    if (s == EM_OK) s = em_item_push(out, "label", em_scalar((double)f->labels[i], EM_I64, EM_CPU));
    return s;
}

static void folder_destroy(em_dataset *ds)
{
    dt_folder *f = (dt_folder *)ds;
    for (int k = 0; k < f->nclass; k++) free(f->classes[k]);
    for (int64_t i = 0; i < f->n; i++) free(f->paths[i]);
    free(f->classes);
    free(f->paths);
    free(f->labels);
}

static const em_dataset_type folder_type = {"image_folder", folder_len, folder_get, folder_destroy};

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted names in dir that are directories (want_dir) or image files; NULL on error. */
static char **list_dir(const char *dir, bool want_dir, int64_t *count)
{
    *count = 0;
    DIR *d = opendir(dir);
    if (!d) {
        em_error(EM_ERR_IO, "em_dataset_image_folder: cannot open directory %s", dir);
        return NULL;
    }
    int64_t n = 0, cap = 16;
    char **names = malloc((size_t)cap * sizeof *names);
    struct dirent *e;
    while (names && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(full, &st) != 0) continue;
        if (want_dir) {
            if (!S_ISDIR(st.st_mode)) continue;
        } else {
            const char *dot = strrchr(e->d_name, '.');
            if (!S_ISREG(st.st_mode) || !dot ||
                (strcasecmp(dot, ".png") && strcasecmp(dot, ".jpg") && strcasecmp(dot, ".jpeg")))
                continue;
        }
        if (n == cap) {
            cap *= 2;
            char **g = realloc(names, (size_t)cap * sizeof *g);
            if (!g) {
                for (int64_t i = 0; i < n; i++) free(names[i]);
                free(names);
                names = NULL;
                break;
            }
            names = g;
        }
        names[n] = strdup(e->d_name);
        if (names[n]) n++;
    }
    closedir(d);
    if (!names) {
        em_error(EM_ERR_OOM, "em_dataset_image_folder: out of memory listing %s", dir);
        return NULL;
    }
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    *count = n;
    return names;
}

em_dataset *em_dataset_image_folder(const char *root, em_image_cfg cfg)
{
    if (!root) {
        em_error(EM_ERR_INVALID_ARG, "em_dataset_image_folder: root is NULL");
        return NULL;
    }
    int64_t nc;
    char **classes = list_dir(root, true, &nc);
    if (!classes) return NULL;
    dt_folder *f = (dt_folder *)em_dataset_alloc(sizeof(dt_folder), &folder_type);
    if (!f) {
        for (int64_t k = 0; k < nc; k++) free(classes[k]);
        free(classes);
        return NULL;
    }
    f->cfg = cfg;
    f->classes = classes;
    f->nclass = (int)nc;
    int64_t cap = 0;
    for (int64_t k = 0; k < nc; k++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/%s", root, classes[k]);
        int64_t nf;
        char **files = list_dir(dir, false, &nf);
        if (!files) {
            em_dataset_free(&f->base);
            return NULL;
        }
        for (int64_t i = 0; i < nf; i++) {
            if (f->n == cap) {
                cap = cap ? cap * 2 : 64;
                char **gp = realloc(f->paths, (size_t)cap * sizeof *gp);
                if (gp) f->paths = gp;
                int64_t *gl = realloc(f->labels, (size_t)cap * sizeof *gl);
                if (gl) f->labels = gl;
                if (!gp || !gl) {
                    for (int64_t j = i; j < nf; j++) free(files[j]);
                    free(files);
                    em_error(EM_ERR_OOM, "em_dataset_image_folder: out of memory");
                    em_dataset_free(&f->base);
                    return NULL;
                }
            }
            size_t len = strlen(dir) + strlen(files[i]) + 2;
            char *p = malloc(len);
            if (p) snprintf(p, len, "%s/%s", dir, files[i]);
            free(files[i]);
            if (!p) continue;
            f->paths[f->n] = p;
            f->labels[f->n++] = k;
        }
        free(files);
    }
    if (f->n == 0) {
        em_error(EM_ERR_FORMAT, "em_dataset_image_folder: no .png/.jpg images under %s/<class>/",
                 root);
        em_dataset_free(&f->base);
        return NULL;
    }
    return &f->base;
}

int em_image_folder_classes(em_dataset *ds)
{
    return ds && ds->type == &folder_type ? ((dt_folder *)ds)->nclass : 0;
}

const char *em_image_folder_class(em_dataset *ds, int k)
{
    if (!ds || ds->type != &folder_type) return NULL;
    dt_folder *f = (dt_folder *)ds;
    return k >= 0 && k < f->nclass ? f->classes[k] : NULL;
}

/* ---- deterministic image helpers --------------------------------------------------------- */

static bool check_chw(const em_tensor *img, const char *what)
{
    if (img && em_tensor_rank(img) == 3) return true;
    if (!em_failed()) {
        char b[64];
        em_error(EM_ERR_SHAPE, "%s: need a [C, H, W] image, got %s", what,
                 img ? em_shape_str(em_tensor_shape(img), b, sizeof b) : "NULL");
    }
    return false;
}

em_tensor *em_image_crop_pad(const em_tensor *img, int64_t top, int64_t left, int64_t h, int64_t w,
                             int64_t pad)
{
    if (!check_chw(img, "em_image_crop_pad")) return NULL;
    em_shape s = em_tensor_shape(img);
    int64_t C = s.dims[0], H = s.dims[1], W = s.dims[2], H2 = 0, W2 = 0;
    /* top + h <= H + 2 pad, without overflowing */
    bool fits = core_muladd_ok(2, pad, H, &H2) && core_muladd_ok(2, pad, W, &W2);
    if (h < 1 || w < 1 || pad < 0 || top < 0 || left < 0 || !fits || top > H2 || h > H2 - top ||
        left > W2 || w > W2 - left) {
        em_error(
            EM_ERR_INDEX,
            "em_image_crop_pad: window %lldx%lld at (%lld, %lld) outside %lldx%lld padded by %lld",
            (long long)h, (long long)w, (long long)top, (long long)left, (long long)H, (long long)W,
            (long long)pad);
        return NULL;
    }
    if (!em_tensor_check_size("em_image_crop_pad", EM_SHAPE(C, h, w), em_tensor_dtype(img), EM_CPU))
        return NULL;
    em_tensor *src = em_contiguous(img);
    em_tensor *out = src ? em_zeros(EM_SHAPE(C, h, w), em_tensor_dtype(img), EM_CPU) : NULL;
    if (out) {
        size_t es = em_dtype_size(em_tensor_dtype(img));
        const unsigned char *a = em_tensor_data(src);
        unsigned char *b = em_tensor_data(out);
        for (int64_t c = 0; c < C; c++)
            for (int64_t y = 0; y < h; y++) {
                int64_t sy = top + y - pad;
                if (sy < 0 || sy >= H) continue;
                int64_t x0 = left - pad, lo = x0 < 0 ? -x0 : 0, hi = W - x0 < w ? W - x0 : w;
                if (hi > lo)
                    memcpy(b + ((c * h + y) * w + lo) * es, a + ((c * H + sy) * W + x0 + lo) * es,
                           (size_t)(hi - lo) * es);
            }
    }
    em_release(src);
    return out;
}

/* Bilinear sample of plane p (H x W) at (y, x); zero outside. */
static double bilinear(const double *p, int64_t H, int64_t W, double y, double x)
{
    double fy = floor(y), fx = floor(x);
    int64_t y0 = (int64_t)fy, x0 = (int64_t)fx;
    double wy = y - fy, wx = x - fx, v = 0;
    for (int dy = 0; dy < 2; dy++)
        for (int dx = 0; dx < 2; dx++) {
            int64_t yy = y0 + dy, xx = x0 + dx;
            double k = (dy ? wy : 1 - wy) * (dx ? wx : 1 - wx);
            if (k != 0 && yy >= 0 && yy < H && xx >= 0 && xx < W) v += k * p[yy * W + xx];
        }
    return v;
}

/* Stores doubles into a new tensor of dt (integers rounded and clamped to their range). */
static em_tensor *from_doubles(double *v, int64_t n, em_shape s, em_dtype dt)
{
    if (dt == EM_U8)
        for (int64_t i = 0; i < n; i++) v[i] = v[i] < 0 ? 0 : v[i] > 255 ? 255 : nearbyint(v[i]);
    else if (em_dtype_is_int(dt))
        for (int64_t i = 0; i < n; i++) v[i] = nearbyint(v[i]);
    return em_from_data(v, EM_F64, s, dt, EM_CPU);
}

em_tensor *em_image_affine(const em_tensor *img, double degrees, double tx, double ty, double scale)
{
    if (!check_chw(img, "em_image_affine")) return NULL;
    if (!(scale > 0)) {
        em_error(EM_ERR_INVALID_ARG, "em_image_affine: scale %g must be positive", scale);
        return NULL;
    }
    em_shape s = em_tensor_shape(img);
    int64_t C = s.dims[0], H = s.dims[1], W = s.dims[2], n = C * H * W;
    double *a = malloc((size_t)(n ? n : 1) * sizeof *a),
           *b = malloc((size_t)(n ? n : 1) * sizeof *b);
    em_tensor *out = NULL;
    if (!a || !b) {
        em_error(EM_ERR_OOM, "em_image_affine: out of memory");
    } else if (em_to_data(img, a, EM_F64, n) == EM_OK) {
        double th = -degrees * M_PI / 180.0, /* counter-clockwise on screen (y down) */
            co = cos(th), si = sin(th);
        double cy = (double)(H - 1) / 2, cx = (double)(W - 1) / 2;
        for (int64_t y = 0; y < H; y++)
            for (int64_t x = 0; x < W; x++) {
                /* inverse map: output pixel -> source position */
                double dx = (double)x - cx - tx, dy = (double)y - cy - ty;
                double sx = (co * dx + si * dy) / scale + cx,
                       sy = (-si * dx + co * dy) / scale + cy;
                for (int64_t c = 0; c < C; c++)
                    b[(c * H + y) * W + x] = bilinear(a + c * H * W, H, W, sy, sx);
            }
        out = from_doubles(b, n, s, em_tensor_dtype(img));
    }
    free(a);
    free(b);
    return out;
}

em_tensor *em_image_resize(const em_tensor *img, int64_t h, int64_t w)
{
    if (!check_chw(img, "em_image_resize")) return NULL;
    if (h < 1 || w < 1) {
        em_error(EM_ERR_INVALID_ARG, "em_image_resize: size %lldx%lld", (long long)h, (long long)w);
        return NULL;
    }
    em_shape s = em_tensor_shape(img);
    int64_t C = s.dims[0], H = s.dims[1], W = s.dims[2], n = C * H * W;
    /* the result, and the f64 copy it is computed in */
    if (!em_tensor_check_size("em_image_resize", EM_SHAPE(C, h, w), em_tensor_dtype(img), EM_CPU) ||
        !em_tensor_check_size("em_image_resize", EM_SHAPE(C, h, w), EM_F64, EM_CPU))
        return NULL;
    double *a = malloc((size_t)(n ? n : 1) * sizeof *a);
    double *b = malloc((size_t)(C * h * w) * sizeof *b);
    em_tensor *out = NULL;
    if (!a || !b) {
        em_error(EM_ERR_OOM, "em_image_resize: out of memory");
    } else if (em_to_data(img, a, EM_F64, n) == EM_OK) {
        /* half-pixel centres, edges clamped (PyTorch bilinear, align_corners=False) */
        for (int64_t y = 0; y < h; y++) {
            double sy = ((double)y + 0.5) * (double)H / (double)h - 0.5;
            sy = sy < 0 ? 0 : sy > (double)(H - 1) ? (double)(H - 1) : sy;
            for (int64_t x = 0; x < w; x++) {
                double sx = ((double)x + 0.5) * (double)W / (double)w - 0.5;
                sx = sx < 0 ? 0 : sx > (double)(W - 1) ? (double)(W - 1) : sx;
                for (int64_t c = 0; c < C; c++)
                    b[(c * h + y) * w + x] = bilinear(a + c * H * W, H, W, sy, sx);
            }
        }
        out = from_doubles(b, C * h * w, EM_SHAPE(C, h, w), em_tensor_dtype(img));
    }
    free(a);
    free(b);
    return out;
}

/* ---- random augmentations ---------------------------------------------------------------- */

typedef struct crop_ctx {
    uint64_t key;
    int64_t h, w, pad;
} crop_ctx;

static em_tensor *crop_fn(const em_tensor *img, int64_t index, int64_t epoch, void *ctx)
{
    crop_ctx *c = ctx;
    if (!check_chw(img, "em_dataset_random_crop")) return NULL;
    int64_t H = 0, W = 0;
    if (!core_muladd_ok(2, c->pad, em_tensor_dim(img, 1), &H) ||
        !core_muladd_ok(2, c->pad, em_tensor_dim(img, 2), &W)) {
        em_error(EM_ERR_SHAPE, "em_dataset_random_crop: padding %lld is too large",
                 (long long)c->pad);
        return NULL;
    }
    if (c->h > H || c->w > W) {
        em_error(EM_ERR_SHAPE,
                 "em_dataset_random_crop: %lldx%lld window in a padded %lldx%lld image",
                 (long long)c->h, (long long)c->w, (long long)H, (long long)W);
        return NULL;
    }
    int64_t top = (int64_t)(em_data_uniform(c->key, epoch, index, 0) * (double)(H - c->h + 1));
    int64_t left = (int64_t)(em_data_uniform(c->key, epoch, index, 1) * (double)(W - c->w + 1));
    return em_image_crop_pad(img, top, left, c->h, c->w, c->pad);
}

em_dataset *em_dataset_random_crop(em_dataset *src, int field, int64_t h, int64_t w, int64_t pad,
                                   uint64_t seed)
{
    if (h < 1 || w < 1 || pad < 0) {
        em_error(EM_ERR_INVALID_ARG, "em_dataset_random_crop: size %lldx%lld, padding %lld",
                 (long long)h, (long long)w, (long long)pad);
        em_dataset_free(src);
        return NULL;
    }
    crop_ctx c = {dt_mix(seed, 0x43524F50u), h, w, pad};
    return dt_field_map(src, field, crop_fn, &c, sizeof c, "em_dataset_random_crop");
}

typedef struct flip_ctx {
    uint64_t key;
    double ph, pv;
} flip_ctx;

static em_tensor *flip_fn(const em_tensor *img, int64_t index, int64_t epoch, void *ctx)
{
    flip_ctx *c = ctx;
    if (!check_chw(img, "em_dataset_random_flip")) return NULL;
    bool fh = em_data_uniform(c->key, epoch, index, 0) < c->ph;
    bool fv = em_data_uniform(c->key, epoch, index, 1) < c->pv;
    em_axes ax = {0};
    if (fv) ax.d[ax.n++] = 1;
    if (fh) ax.d[ax.n++] = 2;
    if (ax.n == 0) return em_retain((em_tensor *)img);
    em_tensor *v = em_flip(img, ax);
    em_tensor *out = em_clone(v);
    em_release(v);
    return out;
}

em_dataset *em_dataset_random_flip(em_dataset *src, int field, double p_h, double p_v,
                                   uint64_t seed)
{
    flip_ctx c = {dt_mix(seed, 0x464C4950u), p_h, p_v};
    return dt_field_map(src, field, flip_fn, &c, sizeof c, "em_dataset_random_flip");
}

typedef struct affine_ctx {
    uint64_t key;
    em_affine_cfg cfg;
} affine_ctx;

static em_tensor *affine_fn(const em_tensor *img, int64_t index, int64_t epoch, void *ctx)
{
    affine_ctx *c = ctx;
    if (!check_chw(img, "em_dataset_random_affine")) return NULL;
    double u0 = em_data_uniform(c->key, epoch, index, 0),
           u1 = em_data_uniform(c->key, epoch, index, 1);
    double u2 = em_data_uniform(c->key, epoch, index, 2),
           u3 = em_data_uniform(c->key, epoch, index, 3);
    double deg = (2 * u0 - 1) * c->cfg.degrees;
    double tx = (2 * u1 - 1) * c->cfg.translate * (double)em_tensor_dim(img, 2);
    double ty = (2 * u2 - 1) * c->cfg.translate * (double)em_tensor_dim(img, 1);
    double sc = 1;
    if (c->cfg.scale_min > 0 && c->cfg.scale_max > 0)
        sc = c->cfg.scale_min + u3 * (c->cfg.scale_max - c->cfg.scale_min);
    return em_image_affine(img, deg, tx, ty, sc);
}

em_dataset *em_dataset_random_affine(em_dataset *src, int field, em_affine_cfg cfg, uint64_t seed)
{
    if (cfg.degrees < 0 || cfg.translate < 0 || cfg.scale_min < 0 ||
        cfg.scale_max < cfg.scale_min) {
        em_error(EM_ERR_INVALID_ARG,
                 "em_dataset_random_affine: degrees %g, translate %g, scale [%g, %g]", cfg.degrees,
                 cfg.translate, cfg.scale_min, cfg.scale_max);
        em_dataset_free(src);
        return NULL;
    }
    affine_ctx c = {dt_mix(seed, 0x4146u), cfg};
    return dt_field_map(src, field, affine_fn, &c, sizeof c, "em_dataset_random_affine");
}

#define NORM_MAX_CH 64

typedef struct norm_ctx {
    int n;
    double mean[NORM_MAX_CH], std[NORM_MAX_CH];
} norm_ctx;

static em_tensor *norm_fn(const em_tensor *img, int64_t index, int64_t epoch, void *ctx)
{
    norm_ctx *c = ctx;
    if (!check_chw(img, "em_dataset_normalize")) return NULL;
    em_shape s = em_tensor_shape(img);
    int64_t C = s.dims[0], hw = s.dims[1] * s.dims[2];
    if (c->n != 1 && c->n != C) {
        em_error(EM_ERR_SHAPE, "em_dataset_normalize: %d means for %lld channels", c->n,
                 (long long)C);
        return NULL;
    }
    double *v = malloc((size_t)(C * hw > 0 ? C * hw : 1) * sizeof *v);
    if (!v) {
        em_error(EM_ERR_OOM, "em_dataset_normalize: out of memory");
        return NULL;
    }
    em_tensor *out = NULL;
    if (em_to_data(img, v, EM_F64, C * hw) == EM_OK) {
        for (int64_t ch = 0; ch < C; ch++) {
            int k = c->n == 1 ? 0 : (int)ch;
            for (int64_t i = 0; i < hw; i++)
                v[ch * hw + i] = (v[ch * hw + i] - c->mean[k]) / c->std[k];
        }
        out = em_from_data(v, EM_F64, s, em_tensor_dtype(img) == EM_F64 ? EM_F64 : EM_F32, EM_CPU);
    }
    free(v);
    return out;
}

em_dataset *em_dataset_normalize(em_dataset *src, int field, const double *mean, const double *std,
                                 int n_ch)
{
    norm_ctx c = {.n = n_ch};
    bool ok = mean && std && n_ch >= 1 && n_ch <= NORM_MAX_CH;
    for (int k = 0; ok && k < n_ch; k++) {
        ok = std[k] != 0;
        c.mean[k] = mean[k];
        c.std[k] = std[k];
    }
    if (!ok) {
        em_error(EM_ERR_INVALID_ARG,
                 "em_dataset_normalize: need 1 to %d means and non-zero stds (got %d)", NORM_MAX_CH,
                 n_ch);
        em_dataset_free(src);
        return NULL;
    }
    return dt_field_map(src, field, norm_fn, &c, sizeof c, "em_dataset_normalize");
}
