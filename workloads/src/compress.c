/*
 * compress: LZW compression and decompression of a buffer in memory, after SPEC95's compress95
 * (Unix compress) as swanson98 §3.1 ran it (about 1,000,000 characters, 2 compress/decompress
 * cycles). Codes grow from 9 to 16 bits; the compressor finds (prefix code, byte) pairs in an
 * open-addressing hash table `htab` of 69001 longs (a prime: the table is at most 95% full),
 * whose slot gives the pair's code in the parallel `codetab` of unsigned shorts; once all 65536
 * codes are used it checks the compression ratio every 10000 input bytes and, when the ratio
 * falls, clears the table and emits a CLEAR code, as compress does. The decompressor reuses the
 * same tables: `codetab` as the prefix of each code, `htab`'s bytes as each code's last byte
 * and, past them, as the stack a code's string is unwound on.
 *
 * Four anonymous mappings, each one region the paper mapped to superpages: the tables (htab,
 * then codetab), and the three buffers of the "file" (original, compressed and decompressed, the
 * same length). The program asks for superpages on each (madvise MADV_HUGEPAGE) after
 * allocating them and before initialising them, where the paper's version called remap(). The
 * original is generated text (a seeded generator: words of a fixed vocabulary, frequent ones
 * often, in lines), which compresses about 2.7 to 2.9 times. Every cycle compresses the original
 * and decompresses the result, which must equal the original.
 * usage: compress KB CYCLES
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define BITS 16
#define HSIZE 69001
#define INIT_BITS 9
#define MAXMAXCODE (1L << BITS)
#define CLEAR 256
#define FIRST 257
#define CHECK_GAP 10000

static long *htab;
static unsigned short *codetab;

static void usage(void) {
    fprintf(stderr, "usage: compress KB CYCLES\n");
    exit(2);
}

static size_t page_up(size_t n) {
    size_t p = (size_t)sysconf(_SC_PAGESIZE);
    return (n + p - 1) / p * p;
}

static void *region(size_t len) {
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    /* Superpages for the region (the paper's remap()); only a hint, so its result is ignored. */
    (void)madvise(p, len, MADV_HUGEPAGE);
    return p;
}

/* SplitMix64: the seeded generator of the input. */
static uint64_t next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Text-like input: words of a vocabulary of 4000, drawn with a skew towards the first ones,
   in lines of 4 to 15 words with some punctuation. */
static void generate(unsigned char *out, size_t len) {
    static const char *syl[] = {"ka", "lo", "mi", "ne", "su", "ta", "ri", "po", "ve", "da", "zu", "fi",
                                "go", "he", "ju", "wa", "xe", "yo", "bri", "cla", "dro", "fle", "gri",
                                "plo", "stu", "tra", "qui", "sha", "the", "ion", "an", "or"};
    enum { VOCAB = 4000 };
    static char words[VOCAB][16];
    uint64_t s = 0x5eedc0deull;
    for (int w = 0; w < VOCAB; w++) {
        int n = 1 + (int)(next(&s) % 3) + (next(&s) % 4 == 0);
        words[w][0] = 0;
        for (int k = 0; k < n; k++) strcat(words[w], syl[next(&s) % (sizeof syl / sizeof syl[0])]);
    }
    size_t at = 0;
    int in_line = 0, line_len = 4 + (int)(next(&s) % 12);
    while (at < len) {
        /* u^2 skews towards small indices: a few words are very frequent. */
        double u = (double)(next(&s) >> 11) * (1.0 / 9007199254740992.0);
        const char *w = words[(int)(u * u * VOCAB)];
        for (const char *c = w; *c && at < len; c++) out[at++] = (unsigned char)*c;
        if (++in_line == line_len) {
            if (at < len) out[at++] = '.';
            if (at < len) out[at++] = '\n';
            in_line = 0;
            line_len = 4 + (int)(next(&s) % 12);
        } else if (at < len) {
            out[at++] = next(&s) % 16 == 0 ? ',' : ' ';
            if (out[at - 1] == ',' && at < len) out[at++] = ' ';
        }
    }
}

/* Bit output, least significant bits first. */
struct bits {
    unsigned char *buf;
    size_t len, at;
    uint64_t acc;
    int n;
    int overflow;
};

static void put_code(struct bits *b, long code, int n_bits) {
    b->acc |= (uint64_t)code << b->n;
    b->n += n_bits;
    while (b->n >= 8) {
        if (b->at < b->len) {
            b->buf[b->at++] = (unsigned char)b->acc;
        } else {
            b->overflow = 1;
        }
        b->acc >>= 8;
        b->n -= 8;
    }
}

static void flush_bits(struct bits *b) {
    if (b->n > 0) {
        if (b->at < b->len) {
            b->buf[b->at++] = (unsigned char)b->acc;
        } else {
            b->overflow = 1;
        }
    }
    b->acc = 0;
    b->n = 0;
}

static void clear_hash(void) {
    for (long i = 0; i < HSIZE; i++) htab[i] = -1;
}

/* Compresses in[0, len) into out (of out_len bytes); returns the bytes written, or -1 if they
   do not fit. */
static long compress(const unsigned char *in, size_t len, unsigned char *out, size_t out_len, long *clears) {
    struct bits b = {out, out_len, 0, 0, 0, 0};
    int n_bits = INIT_BITS;
    long maxcode = (1L << n_bits) - 1, free_ent = FIRST, ratio = 0, checkpoint = CHECK_GAP;
    const int hshift = 8; /* HSIZE >= 65536: i = (c << 8) ^ ent stays below HSIZE */
    clear_hash();
    if (len == 0) return 0;
    long ent = in[0];
    for (size_t k = 1; k < len; k++) {
        int c = in[k];
        long fcode = ((long)c << BITS) + ent;
        long i = ((long)c << hshift) ^ ent;
        if (htab[i] == fcode) {
            ent = codetab[i];
            continue;
        }
        if (htab[i] >= 0) {
            /* Secondary probe. */
            long disp = i == 0 ? 1 : HSIZE - i;
            for (;;) {
                if ((i -= disp) < 0) i += HSIZE;
                if (htab[i] == fcode) break;
                if (htab[i] < 0) break;
            }
            if (htab[i] == fcode) {
                ent = codetab[i];
                continue;
            }
        }
        /* No match: emit the prefix's code, start a new string with c. */
        put_code(&b, ent, n_bits);
        if (free_ent > maxcode && n_bits < BITS) {
            n_bits++;
            maxcode = n_bits == BITS ? MAXMAXCODE : (1L << n_bits) - 1;
        }
        ent = c;
        if (free_ent < MAXMAXCODE) {
            codetab[i] = (unsigned short)free_ent++;
            htab[i] = fcode;
        } else if ((long)k >= checkpoint) {
            /* The table is full: keep it while the ratio improves, else start afresh. */
            checkpoint = (long)k + CHECK_GAP;
            long out_bytes = (long)b.at + 1;
            long rat = (long)k > 0x007fffff ? (long)k / (out_bytes >> 8 ? out_bytes >> 8 : 1)
                                            : ((long)k << 8) / out_bytes;
            if (rat > ratio) {
                ratio = rat;
            } else {
                ratio = 0;
                clear_hash();
                put_code(&b, CLEAR, n_bits);
                free_ent = FIRST;
                n_bits = INIT_BITS;
                maxcode = (1L << n_bits) - 1;
                (*clears)++;
            }
        }
    }
    put_code(&b, ent, n_bits);
    flush_bits(&b);
    return b.overflow ? -1 : (long)b.at;
}

/* Decompresses in[0, len) into out (of out_len bytes); returns the bytes written, or -1 on a
   malformed stream or one that does not fit. */
static long decompress(const unsigned char *in, size_t len, unsigned char *out, size_t out_len) {
    unsigned short *prefix = codetab;
    unsigned char *suffix = (unsigned char *)htab;
    unsigned char *stack = suffix + MAXMAXCODE;
    for (int c = 0; c < 256; c++) prefix[c] = 0, suffix[c] = (unsigned char)c;
    size_t at_bit = 0, total_bits = len * 8, o = 0;
    int n_bits = INIT_BITS, first = 1;
    long maxcode = (1L << n_bits) - 1, free_ent = FIRST, oldcode = -1;
    int finchar = 0;
    for (;;) {
        if (!first && free_ent > maxcode && n_bits < BITS) {
            n_bits++;
            maxcode = n_bits == BITS ? MAXMAXCODE : (1L << n_bits) - 1;
        }
        if (at_bit + (size_t)n_bits > total_bits) break;
        /* Read n_bits bits, least significant first. */
        long code = 0;
        for (int got = 0; got < n_bits;) {
            size_t byte = at_bit >> 3;
            int off = (int)(at_bit & 7), take = 8 - off < n_bits - got ? 8 - off : n_bits - got;
            code |= (long)((in[byte] >> off) & ((1 << take) - 1)) << got;
            got += take;
            at_bit += (size_t)take;
        }
        if (code == CLEAR) {
            free_ent = FIRST;
            n_bits = INIT_BITS;
            maxcode = (1L << n_bits) - 1;
            first = 1;
            continue;
        }
        if (first) {
            if (code > 255 || o >= out_len) return -1;
            out[o++] = (unsigned char)code;
            oldcode = code;
            finchar = (int)code;
            first = 0;
            continue;
        }
        long incode = code;
        unsigned char *sp = stack;
        if (code >= free_ent) {
            /* The string being defined: the previous one and its first byte. */
            if (code > free_ent) return -1;
            *sp++ = (unsigned char)finchar;
            code = oldcode;
        }
        while (code >= 256) {
            *sp++ = suffix[code];
            code = prefix[code];
        }
        finchar = suffix[code];
        *sp++ = (unsigned char)finchar;
        if (o + (size_t)(sp - stack) > out_len) return -1;
        while (sp > stack) out[o++] = *--sp;
        if (free_ent < MAXMAXCODE) {
            prefix[free_ent] = (unsigned short)oldcode;
            suffix[free_ent] = (unsigned char)finchar;
            free_ent++;
        }
        oldcode = incode;
    }
    return (long)o;
}

int main(int argc, char **argv) {
    if (argc != 3) usage();
    long kb = atol(argv[1]), cycles = atol(argv[2]);
    if (kb < 1 || kb > (1L << 22) || cycles < 1) usage();
    size_t len = (size_t)kb * 1000; /* KB of characters, as the paper counts them */

    /* The tables: htab, then codetab, in one region. */
    size_t htab_bytes = HSIZE * sizeof(long);
    size_t tables_len = page_up(htab_bytes + HSIZE * sizeof(unsigned short));
    char *tables = region(tables_len);
    htab = (long *)tables;
    codetab = (unsigned short *)(tables + htab_bytes);
    /* The three buffers. */
    size_t buf_len = page_up(len);
    unsigned char *orig = region(buf_len), *comp = region(buf_len), *decomp = region(buf_len);

    generate(orig, len);
    long packed = 0, clears = 0;
    int ok = 1;
    for (long c = 0; c < cycles && ok; c++) {
        clears = 0;
        packed = compress(orig, len, comp, buf_len, &clears);
        if (packed < 0) {
            fprintf(stderr, "compress: the compressed data do not fit in %zu bytes\n", buf_len);
            return 1;
        }
        long unpacked = decompress(comp, (size_t)packed, decomp, buf_len);
        ok = unpacked == (long)len && memcmp(orig, decomp, len) == 0;
    }
    printf("compress: %zu bytes, %ld cycles: %ld bytes compressed (%.2fx, %ld table clears), %s\n", len, cycles, packed,
           packed > 0 ? (double)len / (double)packed : 0.0, clears, ok ? "decompressed equal" : "WRONG");
    return ok ? 0 : 1;
}
