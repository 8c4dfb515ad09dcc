/* Random numbers: Philox 4x32-10 (Random123) and the global generator {seed, offset}.
 *
 * The stream, which every backend reproduces bit for bit:
 *   word(seed, offset, i) = philox(counter, key)[i % 4] with
 *     c       = offset + i / 4                      (mod 2^64)
 *     counter = {(uint32)c, (uint32)(c >> 32), 0, 0}
 *     key     = {(uint32)seed, (uint32)(seed >> 32)}
 *   uniform(i) = ((word(2i) >> 5) * 2^26 + (word(2i+1) >> 6)) / 2^53    53 random bits, [0,1)
 *   normal(i)  = Box-Muller on u1 = uniform(2j), u2 = uniform(2j+1), j = i / 2:
 *                r = sqrt(-2 log(1 - u1)), value r cos(2 pi u2) for even i, r sin(2 pi u2) for odd
 *   so uniform i uses counter offset + i/2 and normals 2j, 2j+1 share counter offset + j.
 * A random op asks em_rng_reserve(n) for the n 32-bit words it will consume (2 per uniform or
 * normal value); the offset advances by ceil(n / 4) + 1 counters. The extra counter is slack,
 * so an op may round its count up (normals come in pairs) without reaching the next op's. */
#include <math.h>
#include <pthread.h>

#include "core_impl.h"

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u
#define TWO_PI    6.283185307179586476925286766559

static pthread_mutex_t rng_lock = PTHREAD_MUTEX_INITIALIZER;
static em_rng_state rng_state;

void em_philox4x32(const uint32_t counter[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        uint64_t p0 = (uint64_t)PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)PHILOX_M1 * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0;
        c1 = lo1;
        c2 = hi0 ^ c3 ^ k1;
        c3 = lo0;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* The four words of counter number offset + block. */
static void stream_block(uint64_t seed, uint64_t offset, uint64_t block, uint32_t out[4])
{
    uint64_t c = offset + block;
    const uint32_t counter[4] = {(uint32_t)c, (uint32_t)(c >> 32), 0, 0};
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    em_philox4x32(counter, key, out);
}

static double to_unit(uint32_t w_hi, uint32_t w_lo)
{
    return ((double)(w_hi >> 5) * 67108864.0 + (double)(w_lo >> 6)) / 9007199254740992.0;
}

uint32_t em_rng_u32_at(uint64_t seed, uint64_t offset, uint64_t i)
{
    uint32_t w[4];
    stream_block(seed, offset, i / 4, w);
    return w[i % 4];
}

double em_rng_uniform_at(uint64_t seed, uint64_t offset, uint64_t i)
{
    /* Words 2i and 2i+1 always share a counter: 2i is even. */
    uint32_t w[4];
    stream_block(seed, offset, i / 2, w);
    unsigned k = (unsigned)(i % 2) * 2;
    return to_unit(w[k], w[k + 1]);
}

double em_rng_normal_at(uint64_t seed, uint64_t offset, uint64_t i)
{
    /* Uniforms 2j and 2j+1 are words 4j..4j+3: one counter. */
    uint32_t w[4];
    stream_block(seed, offset, i / 2, w);
    double u1 = to_unit(w[0], w[1]);
    double u2 = to_unit(w[2], w[3]);
    double r = sqrt(-2.0 * log(1.0 - u1));
    double theta = TWO_PI * u2;
    return (i % 2) ? r * sin(theta) : r * cos(theta);
}

void em_seed(uint64_t seed)
{
    core_init();
    pthread_mutex_lock(&rng_lock);
    rng_state.seed = seed;
    rng_state.offset = 0;
    pthread_mutex_unlock(&rng_lock);
}

em_rng_state em_rng_get_state(void)
{
    core_init();
    pthread_mutex_lock(&rng_lock);
    em_rng_state s = rng_state;
    pthread_mutex_unlock(&rng_lock);
    return s;
}

void em_rng_set_state(em_rng_state s)
{
    core_init();
    pthread_mutex_lock(&rng_lock);
    rng_state = s;
    pthread_mutex_unlock(&rng_lock);
}

uint64_t em_rng_reserve(uint64_t n)
{
    return core_rng_take(n / 4 + (n % 4 != 0) + 1).offset;
}

em_rng_state core_rng_take(uint64_t counters)
{
    core_init();
    pthread_mutex_lock(&rng_lock);
    em_rng_state s = rng_state;
    rng_state.offset += counters;
    pthread_mutex_unlock(&rng_lock);
    return s;
}
