/*
 * xlat's QEMU TCG plugin (QEMU 7.2 user mode, plugin API version 1).
 *
 * Records every guest instruction fetch, load and store with its size, plus the system calls
 * that change the address space (mmap, munmap, mremap, mprotect, madvise that drops pages, brk),
 * fork and exit, and streams them as
 * compact binary records to a FIFO named by the plugin argument `fifo=PATH`. The record stream
 * is described in docs/tracing.md ("The plugin's record stream"); the reader is
 * crates/xlat/src/tracer/stream.rs.
 *
 * Records are buffered per guest thread and written in whole chunks of at most 4096 bytes
 * (PIPE_BUF), each starting with a header naming the process and the thread, so that the writes
 * of forked processes sharing the FIFO never interleave inside a chunk.
 *
 * Instruction fetches cost one callback per executed translation block, not one per
 * instruction: the block's instructions are emitted lazily, up to the instruction that makes a
 * memory access (from the memory callback) or all of them when the next block starts, at a
 * system call or at exit. So program order is kept at instruction granularity.
 *
 * Under `xlat trace --children`, programs exec'd by the traced ones run under QEMU again (see
 * xlat_exec_shim.c) with the argument `exec=1`: such an instance first sends an exec record, so
 * the reader gives the process's new image a new ASID.
 *
 * The plugin API is declared below from QEMU's documentation of version 1 of the API (QEMU
 * 7.2): only the functions used here.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/in.h>

/* ---- QEMU plugin API (7.2, version 1), the subset used ---- */

#define XP_EXPORT __attribute__((visibility("default")))

typedef uint64_t qemu_plugin_id_t;
typedef uint32_t qemu_plugin_meminfo_t;
struct qemu_plugin_tb;
struct qemu_plugin_insn;

typedef struct {
    const char *target_name;
    struct {
        int min;
        int cur;
    } version;
    bool system_emulation;
    union {
        struct {
            int smp_vcpus;
            int max_vcpus;
        } system;
    };
} qemu_info_t;

enum qemu_plugin_cb_flags { QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_CB_R_REGS, QEMU_PLUGIN_CB_RW_REGS };
enum qemu_plugin_mem_rw { QEMU_PLUGIN_MEM_R = 1, QEMU_PLUGIN_MEM_W, QEMU_PLUGIN_MEM_RW };

typedef void (*qemu_plugin_vcpu_tb_trans_cb_t)(qemu_plugin_id_t id, struct qemu_plugin_tb *tb);
typedef void (*qemu_plugin_vcpu_udata_cb_t)(unsigned int vcpu_index, void *userdata);
typedef void (*qemu_plugin_vcpu_mem_cb_t)(unsigned int vcpu_index, qemu_plugin_meminfo_t info, uint64_t vaddr,
                                          void *userdata);
typedef void (*qemu_plugin_vcpu_syscall_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_index, int64_t num,
                                              uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4, uint64_t a5,
                                              uint64_t a6, uint64_t a7, uint64_t a8);
typedef void (*qemu_plugin_vcpu_syscall_ret_cb_t)(qemu_plugin_id_t id, unsigned int vcpu_idx, int64_t num,
                                                  int64_t ret);
typedef void (*qemu_plugin_udata_cb_t)(qemu_plugin_id_t id, void *userdata);

void qemu_plugin_register_vcpu_tb_trans_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_tb_trans_cb_t cb);
void qemu_plugin_register_vcpu_insn_exec_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_udata_cb_t cb,
                                            enum qemu_plugin_cb_flags flags, void *userdata);
void qemu_plugin_register_vcpu_mem_cb(struct qemu_plugin_insn *insn, qemu_plugin_vcpu_mem_cb_t cb,
                                      enum qemu_plugin_cb_flags flags, enum qemu_plugin_mem_rw rw,
                                      void *userdata);
size_t qemu_plugin_tb_n_insns(const struct qemu_plugin_tb *tb);
struct qemu_plugin_insn *qemu_plugin_tb_get_insn(const struct qemu_plugin_tb *tb, size_t idx);
uint64_t qemu_plugin_insn_vaddr(const struct qemu_plugin_insn *insn);
size_t qemu_plugin_insn_size(const struct qemu_plugin_insn *insn);
unsigned int qemu_plugin_mem_size_shift(qemu_plugin_meminfo_t info);
bool qemu_plugin_mem_is_store(qemu_plugin_meminfo_t info);
void qemu_plugin_register_vcpu_syscall_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_syscall_cb_t cb);
void qemu_plugin_register_vcpu_syscall_ret_cb(qemu_plugin_id_t id, qemu_plugin_vcpu_syscall_ret_cb_t cb);
void qemu_plugin_register_atexit_cb(qemu_plugin_id_t id, qemu_plugin_udata_cb_t cb, void *userdata);
const char *qemu_plugin_path_to_binary(void);
uint64_t qemu_plugin_start_code(void);
uint64_t qemu_plugin_end_code(void);

XP_EXPORT int qemu_plugin_version = 1;

/* ---- the record stream (docs/tracing.md) ---- */

#define CHUNK 4096
#define HEADER 12
#define MAGIC 0x5851 /* "QX" little-endian */
/* Room a record may need: an ifetch run header (10) or the largest event (21). */
#define ROOM 32

enum {
    R_IFETCH = 0x01, /* n:u8 vaddr:u64 size:u8 * n */
    R_MAP = 0x02,    /* start:u64 len:u64 flags:u32 */
    R_UNMAP = 0x03,  /* start:u64 len:u64 */
    R_FORK = 0x04,   /* child pid:u32 */
    R_EXIT = 0x05,   /* (none) */
    R_START = 0x06,  /* parent pid:u32: first record of a forked process */
    R_EXEC = 0x07,   /* (none): first record of a new program image of the process (execve) */
    R_EXEC_CALL = 0x08, /* n:u8 path[n]: the process calls execve (or execveat) on path */
    R_EXEC_FAIL = 0x09, /* (none): that execve failed; the process goes on */
    R_YIELD = 0x0a,     /* (none): the process yields or may block here (a scheduling point) */
    R_OBJECT = 0x0b,    /* dev:u64 ino:u64 offset:u64 n:u8 path[n]: the next map maps this object */
    R_PIPE_SEND = 0x0c, /* end:u64 bytes:u32: the process sends to the channel end `end` */
    R_PIPE_RECV = 0x0d, /* end:u64: the process receives from the channel end `end` */
    R_SYSCALL = 0x0e,   /* nr:u32 fd:u8 dev:u64 ino:u64 buf:u64 len:u64: a system call (fd: kind | direction) */
    R_PROTECT = 0x0f,   /* start:u64 len:u64 rights:u32: mprotect to rights (read 1, write 2, exec 4) */
    R_DISCARD = 0x10,   /* start:u64 len:u64 lazy:u8: madvise dropping the range's pages (lazy: MADV_FREE) */
    /* 0x80 | store 0x40 | modify 0x20 | short 0x10 | size shift (0-7):
       then an i32 delta from the previous data address of the chunk (short) or a u64. */
    R_DATA = 0x80,
};
#define D_STORE 0x40
#define D_MODIFY 0x20
#define D_SHORT 0x10

struct tbinfo {
    uint32_t n;
    uint64_t *vaddr;
    uint8_t *size;
};

/* Userdata of an instruction's memory callback: its block and index. */
struct insnref {
    struct tbinfo *tb;
    uint32_t idx;
};

struct buf {
    uint8_t data[CHUNK];
    uint32_t len;
    uint32_t owner; /* pid of the process whose records these are */
    uint32_t tid;   /* the guest thread (Linux thread ID) that fills this buffer */
    struct tbinfo *cur;
    uint32_t done; /* instructions of `cur` already emitted */
    uint64_t last_data;
    /* The last load, to turn a following store to the same bytes by the same instruction into a
       modify (as valgrind's lackey reports read-modify-write instructions). */
    uint32_t load_pos; /* offset of the tag, 0 = none */
    uint64_t load_addr;
    const struct insnref *load_insn;
    uint8_t load_shift;
    /* Arguments of the pending system call. */
    int64_t sc_num;
    uint64_t sc_a[6];
    struct buf *next;
};

static int out_fd = -1;
static volatile uint32_t cur_pid;
static uint64_t brk_cur; /* current program break, 0 until known */
/* Buffers by vCPU index (one guest thread each in user mode); higher indices use the TLS slot. */
#define MAX_VCPUS 1024
static struct buf *by_vcpu[MAX_VCPUS];
static __thread struct buf *tls;
/* This host thread's guest thread ID, 0 until asked (initial-exec: a plain %fs load). */
static __thread __attribute__((tls_model("initial-exec"))) uint32_t my_tid;

static inline uint32_t current_tid(void)
{
    if (__builtin_expect(my_tid == 0, 0)) {
        my_tid = (uint32_t)syscall(SYS_gettid);
    }
    return my_tid;
}
static struct buf *all_bufs;
static int bufs_lock;

static void die(const char *msg)
{
    char line[256];
    int n = snprintf(line, sizeof line, "xlat plugin: %s: %s\n", msg, strerror(errno));
    if (write(2, line, n) < 0) {
        /* nothing else to do */
    }
    _exit(125);
}

static struct buf *new_buf(void)
{
    struct buf *b = calloc(1, sizeof *b);
    if (!b) {
        die("out of memory");
    }
    b->len = HEADER;
    b->owner = cur_pid;
    b->tid = current_tid();
    while (__atomic_exchange_n(&bufs_lock, 1, __ATOMIC_ACQUIRE)) {
    }
    b->next = all_bufs;
    all_bufs = b;
    __atomic_store_n(&bufs_lock, 0, __ATOMIC_RELEASE);
    return b;
}

static struct buf *get_buf_slow(unsigned int vcpu)
{
    struct buf **slot = vcpu < MAX_VCPUS ? &by_vcpu[vcpu] : &tls;
    struct buf *b = *slot;
    if (!b) {
        return *slot = new_buf();
    }
    if (b->owner != cur_pid) {
        /* A buffer inherited at fork from a thread of the parent: start afresh. */
        b->len = HEADER;
        b->owner = cur_pid;
        b->tid = current_tid();
        b->cur = NULL;
        b->load_pos = 0;
        b->last_data = 0;
    }
    return b;
}

static inline struct buf *get_buf(unsigned int vcpu)
{
    struct buf *b = vcpu < MAX_VCPUS ? by_vcpu[vcpu] : NULL;
    if (__builtin_expect(b == NULL || b->owner != cur_pid, 0)) {
        b = get_buf_slow(vcpu);
    }
    return b;
}

static void flush(struct buf *b)
{
    if (b->len <= HEADER) {
        return;
    }
    uint16_t magic = MAGIC, len = (uint16_t)(b->len - HEADER);
    memcpy(b->data, &magic, 2);
    memcpy(b->data + 2, &len, 2);
    memcpy(b->data + 4, &b->owner, 4);
    memcpy(b->data + 8, &b->tid, 4);
    size_t off = 0;
    while (off < b->len) {
        ssize_t w = write(out_fd, b->data + off, b->len - off);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EPIPE) {
                _exit(125); /* xlat went away */
            }
            die("cannot write the trace stream");
        }
        off += (size_t)w;
    }
    b->len = HEADER;
    b->last_data = 0;
    b->load_pos = 0;
}

static inline void room(struct buf *b, uint32_t need)
{
    if (__builtin_expect(b->len + need > CHUNK, 0)) {
        flush(b);
    }
}

static inline void put8(struct buf *b, uint8_t v)
{
    b->data[b->len++] = v;
}

static inline void put32(struct buf *b, uint32_t v)
{
    memcpy(b->data + b->len, &v, 4);
    b->len += 4;
}

static inline void put64(struct buf *b, uint64_t v)
{
    memcpy(b->data + b->len, &v, 8);
    b->len += 8;
}

/* Emits instructions [b->done, upto) of the current block as ifetch runs of contiguous
   instructions. */
static void emit_ifetches(struct buf *b, uint32_t upto)
{
    struct tbinfo *t = b->cur;
    uint32_t i = b->done;
    while (i < upto) {
        uint32_t j = i + 1;
        while (j < upto && j - i < 255 && t->vaddr[j] == t->vaddr[j - 1] + t->size[j - 1]) {
            j++;
        }
        uint32_t n = j - i;
        room(b, 10 + n);
        put8(b, R_IFETCH);
        put8(b, (uint8_t)n);
        put64(b, t->vaddr[i]);
        memcpy(b->data + b->len, t->size + i, n);
        b->len += n;
        i = j;
    }
    b->done = upto;
    b->load_pos = 0;
}

static inline void finish_block(struct buf *b)
{
    if (b->cur && b->done < b->cur->n) {
        emit_ifetches(b, b->cur->n);
    }
}

static void tb_exec(unsigned int vcpu, void *ud)
{
    struct buf *b = get_buf(vcpu);
    if (__builtin_expect(b->tid != current_tid(), 0)) {
        /* QEMU gave an exited thread's vCPU index to a new thread: the buffer is the new
           thread's from here on (the old one's records went out at its exit). */
        finish_block(b);
        flush(b);
        b->tid = current_tid();
        b->cur = NULL;
    }
    finish_block(b);
    b->cur = ud;
    b->done = 0;
}

static void mem_cb(unsigned int vcpu, qemu_plugin_meminfo_t info, uint64_t vaddr, void *ud)
{
    const struct insnref *r = ud;
    struct buf *b = get_buf(vcpu);
    if (b->cur == r->tb && b->done <= r->idx) {
        emit_ifetches(b, r->idx + 1);
    }
    unsigned shift = qemu_plugin_mem_size_shift(info);
    bool store = qemu_plugin_mem_is_store(info);
    if (store && b->load_pos && b->load_insn == r && b->load_addr == vaddr && b->load_shift == shift) {
        b->data[b->load_pos] |= D_MODIFY;
        b->load_pos = 0;
        return;
    }
    room(b, 9);
    int64_t delta = (int64_t)(vaddr - b->last_data);
    uint32_t pos = b->len;
    uint8_t tag = R_DATA | (store ? D_STORE : 0) | (uint8_t)(shift & 7);
    if (delta == (int32_t)delta) {
        put8(b, tag | D_SHORT);
        put32(b, (uint32_t)(int32_t)delta);
    } else {
        put8(b, tag);
        put64(b, vaddr);
    }
    b->last_data = vaddr;
    if (store) {
        b->load_pos = 0;
    } else {
        b->load_pos = pos;
        b->load_addr = vaddr;
        b->load_insn = r;
        b->load_shift = (uint8_t)shift;
    }
}

static void ev_object(struct buf *b, uint64_t flags, uint64_t fd, uint64_t offset);
static void ev_map(struct buf *b, uint64_t start, uint64_t len, uint32_t flags);

/* Set once the program image's text has been announced (a forked child inherits it set). */
static bool image_announced;

/* The program's text segment, which QEMU's loader mapped before any system call the plugin
   sees: announced once per image, at its first translation (the image is loaded by then), as a
   map with the image flag (128) of the executable's object. */
static void announce_image(void)
{
    image_announced = true;
    uint64_t lo = qemu_plugin_start_code() & ~(uint64_t)0xfff, hi = (qemu_plugin_end_code() + 0xfff) & ~(uint64_t)0xfff;
    const char *exe = qemu_plugin_path_to_binary();
    if (hi <= lo || !exe) {
        return;
    }
    static struct buf img;
    img.len = HEADER;
    img.owner = cur_pid;
    img.tid = (uint32_t)syscall(SYS_gettid);
    int fd = open(exe, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ev_object(&img, 0, (uint64_t)fd, 0);
        close(fd);
    }
    ev_map(&img, lo, hi - lo, 1 | 4 | 64 | 128);
    flush(&img);
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    if (!image_announced) {
        announce_image();
    }
    size_t n = qemu_plugin_tb_n_insns(tb);
    if (n == 0) {
        return;
    }
    /* Never freed: blocks may be retranslated, and their callbacks keep these pointers. */
    struct tbinfo *t = malloc(sizeof *t + n * (sizeof(uint64_t) + 1) + n * sizeof(struct insnref) + 16);
    if (!t) {
        die("out of memory");
    }
    struct insnref *refs = (struct insnref *)(t + 1);
    t->vaddr = (uint64_t *)(refs + n);
    t->size = (uint8_t *)(t->vaddr + n);
    t->n = (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        t->vaddr[i] = qemu_plugin_insn_vaddr(insn);
        size_t sz = qemu_plugin_insn_size(insn);
        t->size[i] = (uint8_t)(sz == 0 ? 1 : sz > 255 ? 255 : sz);
        refs[i].tb = t;
        refs[i].idx = (uint32_t)i;
        if (i == 0) {
            qemu_plugin_register_vcpu_insn_exec_cb(insn, tb_exec, QEMU_PLUGIN_CB_NO_REGS, t);
        }
        qemu_plugin_register_vcpu_mem_cb(insn, mem_cb, QEMU_PLUGIN_CB_NO_REGS, QEMU_PLUGIN_MEM_RW, &refs[i]);
    }
}

/* x86-64 system call numbers. */
enum {
    SYS_MMAP = 9,
    SYS_MUNMAP = 11,
    SYS_BRK = 12,
    SYS_MPROTECT = 10,
    SYS_MREMAP = 25,
    SYS_MADVISE = 28,
    SYS_CLONE = 56,
    SYS_FORK = 57,
    SYS_VFORK = 58,
    SYS_EXECVE = 59,
    SYS_EXIT = 60,
    SYS_EXIT_GROUP = 231,
    SYS_EXECVEAT = 322,
    SYS_CLONE3 = 435,
    SYS_PKEY_MPROTECT = 329,
    /* Calls that yield the processor or may block (scheduling points). */
    SYS_READ = 0,
    SYS_POLL = 7,
    SYS_READV = 19,
    SYS_WRITE = 1,
    SYS_WRITEV = 20,
    SYS_SELECT = 23,
    SYS_SCHED_YIELD = 24,
    SYS_PAUSE = 34,
    SYS_NANOSLEEP = 35,
    SYS_RECVFROM = 45,
    SYS_PREAD64 = 17,
    SYS_PWRITE64 = 18,
    SYS_SENDTO = 44,
    SYS_RECVMSG = 47,
    SYS_SENDMSG = 46,
    SYS_WAIT4 = 61,
    SYS_FUTEX = 202,
    SYS_CLOCK_NANOSLEEP = 230,
    SYS_EPOLL_WAIT = 232,
    SYS_WAITID = 247,
    SYS_PSELECT6 = 270,
    SYS_PPOLL = 271,
    SYS_EPOLL_PWAIT = 281,
};
#define CLONE_VM 0x100
#define CLONE_VFORK 0x4000
#define PROT_READ 1
#define PROT_WRITE 2
#define PROT_EXEC 4
#define MAP_SHARED 1
#define MADV_HUGEPAGE 14
/* madvise advice that drops the range's pages at once (Linux madvise(2): later accesses find
   zero-fill pages or the file's contents) and MADV_FREE, which frees them only under memory
   pressure but clears their dirty bits, flushing their TLB entries. */
#define MADV_DONTNEED 4
#define MADV_FREE 8
#define MADV_REMOVE 9
#define MADV_DONTNEED_LOCKED 24
#define MAP_ANONYMOUS 0x20
#define MREMAP_FIXED 2

static uint64_t page_up(uint64_t v)
{
    return (v + 4095) & ~(uint64_t)4095;
}

static void ev_map(struct buf *b, uint64_t start, uint64_t len, uint32_t flags)
{
    room(b, 21);
    put8(b, R_MAP);
    put64(b, start);
    put64(b, len);
    put32(b, flags);
}

/* Shared anonymous mappings get an object number of their own: the process ID above a counter
   (a forked child inherits the mapping, and with it the number, without a new map). */
static uint64_t anon_objects;

/* The object a successful mmap maps: a file (its device, inode and path, from the descriptor,
   which in user mode is the host's) or shared anonymous memory. Nothing for private anonymous
   memory. */
static void ev_object(struct buf *b, uint64_t flags, uint64_t fd, uint64_t offset)
{
    uint64_t dev = 0, ino = 0;
    char path[256];
    size_t len = 0;
    if (!(flags & MAP_ANONYMOUS) && (int64_t)fd >= 0) {
        struct stat st;
        if (fstat((int)fd, &st) != 0) {
            return;
        }
        dev = (uint64_t)st.st_dev, ino = (uint64_t)st.st_ino;
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", (int)fd);
        ssize_t n = readlink(link, path, sizeof path - 1);
        len = n > 0 ? (size_t)n : 0;
    } else if (flags & MAP_SHARED) {
        ino = ((uint64_t)getpid() << 32) | ++anon_objects;
        offset = 0;
    } else {
        return;
    }
    room(b, 26 + (uint32_t)len);
    put8(b, R_OBJECT);
    put64(b, dev);
    put64(b, ino);
    put64(b, offset);
    put8(b, (uint8_t)len);
    memcpy(b->data + b->len, path, len);
    b->len += (uint32_t)len;
}

static void ev_unmap(struct buf *b, uint64_t start, uint64_t len)
{
    room(b, 17);
    put8(b, R_UNMAP);
    put64(b, start);
    put64(b, len);
}

static void ev_protect(struct buf *b, uint64_t start, uint64_t len, uint64_t prot)
{
    room(b, 21);
    put8(b, R_PROTECT);
    put64(b, start);
    put64(b, len);
    put32(b, ((prot & PROT_READ) ? 1 : 0) | ((prot & PROT_WRITE) ? 2 : 0) | ((prot & PROT_EXEC) ? 4 : 0));
}

static void ev_discard(struct buf *b, uint64_t start, uint64_t len, bool lazy)
{
    room(b, 18);
    put8(b, R_DISCARD);
    put64(b, start);
    put64(b, len);
    put8(b, lazy ? 1 : 0);
}

/* A system call that makes a new process. QEMU user mode runs vfork and clone with CLONE_VFORK
   (posix_spawn) as a plain fork; clone3 it refuses (ENOSYS), and the C library falls back to
   clone. */
static bool is_fork(int64_t num, uint64_t a1)
{
    return num == SYS_FORK || num == SYS_VFORK || (num == SYS_CLONE && (!(a1 & CLONE_VM) || (a1 & CLONE_VFORK)));
}

/* The program an execve names: the path string at guest address `addr`, read through
   /proc/self/mem (guest addresses are host addresses in x86-64 user mode on an x86-64 host; a bad
   pointer reads as an error, never as a crash). Emitted as R_EXEC_CALL, so that xlat can say which
   program it does not trace when the exec succeeds without the exec shim. */
static void ev_exec_call(struct buf *b, uint64_t addr)
{
    char path[256];
    ssize_t n = -1;
    int fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = pread(fd, path, sizeof path - 1, (off_t)addr);
        close(fd);
    }
    size_t len = 0;
    if (n > 0) {
        path[n] = 0;
        len = strnlen(path, (size_t)n);
        for (size_t i = 0; i < len; i++) {
            if ((unsigned char)path[i] < 0x20 || (unsigned char)path[i] == 0x7f) {
                len = 0; /* not a path */
                break;
            }
        }
    }
    room(b, 2 + (uint32_t)len);
    put8(b, R_EXEC_CALL);
    put8(b, (uint8_t)len);
    memcpy(b->data + b->len, path, len);
    b->len += (uint32_t)len;
}

/* True if the call yields the processor or may block: sched_yield, sleeps, waits for children,
   polls, futex waits, and reads from pipes and sockets (the guest's descriptors are the host's
   in user mode, so fstat tells). */
static bool yields(int64_t num, uint64_t a1, uint64_t a2)
{
    switch (num) {
    case SYS_SCHED_YIELD:
    case SYS_PAUSE:
    case SYS_NANOSLEEP:
    case SYS_CLOCK_NANOSLEEP:
    case SYS_WAIT4:
    case SYS_WAITID:
    case SYS_POLL:
    case SYS_PPOLL:
    case SYS_SELECT:
    case SYS_PSELECT6:
    case SYS_EPOLL_WAIT:
    case SYS_EPOLL_PWAIT:
        return true;
    case SYS_FUTEX: {
        uint64_t op = a2 & 0x7f; /* without FUTEX_PRIVATE_FLAG and FUTEX_CLOCK_REALTIME */
        return op == 0 /* FUTEX_WAIT */ || op == 9 /* FUTEX_WAIT_BITSET */;
    }
    case SYS_READ:
    case SYS_READV:
    case SYS_RECVFROM:
    case SYS_RECVMSG: {
        struct stat st;
        return fstat((int)a1, &st) == 0 && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
    }
    default:
        return false;
    }
}

/* The peer of the Unix socket `ino`: its inode, from the kernel's socket diagnostics
   (NETLINK_SOCK_DIAG, UNIX_DIAG_PEER); 0 if unknown. */
static uint64_t unix_peer(uint64_t ino)
{
    int s = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (s < 0) {
        return 0;
    }
    struct {
        struct nlmsghdr nlh;
        struct unix_diag_req req;
    } q;
    memset(&q, 0, sizeof q);
    q.nlh.nlmsg_len = sizeof q;
    q.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    q.nlh.nlmsg_flags = NLM_F_REQUEST;
    q.req.sdiag_family = AF_UNIX;
    q.req.udiag_states = ~0u;
    q.req.udiag_ino = (uint32_t)ino;
    q.req.udiag_show = UDIAG_SHOW_PEER;
    q.req.udiag_cookie[0] = q.req.udiag_cookie[1] = ~0u;
    struct sockaddr_nl nl;
    memset(&nl, 0, sizeof nl);
    nl.nl_family = AF_NETLINK;
    uint64_t peer = 0;
    union {
        struct nlmsghdr h;
        char bytes[1024];
    } r;
    if (sendto(s, &q, sizeof q, 0, (struct sockaddr *)&nl, sizeof nl) == (ssize_t)sizeof q) {
        ssize_t n = recv(s, &r, sizeof r, 0);
        struct nlmsghdr *h = &r.h;
        if (n > 0 && NLMSG_OK(h, (uint32_t)n) && h->nlmsg_type == SOCK_DIAG_BY_FAMILY) {
            struct unix_diag_msg *m = NLMSG_DATA(h);
            int len = (int)h->nlmsg_len - (int)NLMSG_LENGTH(sizeof *m);
            for (struct rtattr *a = (struct rtattr *)(m + 1); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
                if (a->rta_type == UNIX_DIAG_PEER && RTA_PAYLOAD(a) >= sizeof(uint32_t)) {
                    uint32_t v;
                    memcpy(&v, RTA_DATA(a), sizeof v);
                    peer = v;
                }
            }
        }
    }
    close(s);
    return peer;
}

/* An Internet socket address as a channel end: FNV-1a over family, address and port, top bit
   set (apart from inode numbers). On loopback the peer's own address is this socket's peer
   address, so both sides name each end alike. 0 if the address is unknown. */
static uint64_t inet_end(const struct sockaddr_storage *a, socklen_t len)
{
    const uint8_t *p;
    size_t n;
    uint16_t port;
    if (a->ss_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        const struct sockaddr_in *v = (const struct sockaddr_in *)a;
        p = (const uint8_t *)&v->sin_addr, n = sizeof v->sin_addr, port = v->sin_port;
    } else if (a->ss_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        const struct sockaddr_in6 *v = (const struct sockaddr_in6 *)a;
        p = (const uint8_t *)&v->sin6_addr, n = sizeof v->sin6_addr, port = v->sin6_port;
    } else {
        return 0;
    }
    uint64_t h = (0xcbf29ce484222325ull ^ a->ss_family) * 0x100000001b3ull;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * 0x100000001b3ull;
    }
    h = (h ^ (port & 0xff)) * 0x100000001b3ull;
    h = (h ^ (port >> 8)) * 0x100000001b3ull;
    return h | 1ull << 63;
}

/* The channel end a call on descriptor `fd` (with status `st`) sends to (`send`) or receives
   from: a pipe's inode (one object for both ends); a Unix socket's own inode for a receive and
   its peer's for a send; an Internet socket's own address for a receive and its peer's for a
   send. 0 if the descriptor is no channel or the peer is unknown (not connected). */
static uint64_t channel_end(int fd, const struct stat *st, bool send)
{
    if (S_ISFIFO(st->st_mode)) {
        return (uint64_t)st->st_ino;
    }
    if (!S_ISSOCK(st->st_mode)) {
        return 0;
    }
    int domain = 0;
    socklen_t dl = sizeof domain;
    if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &dl) != 0) {
        return 0;
    }
    if (domain == AF_UNIX) {
        return send ? unix_peer((uint64_t)st->st_ino) : (uint64_t)st->st_ino;
    }
    if (domain == AF_INET || domain == AF_INET6) {
        struct sockaddr_storage a;
        socklen_t len = sizeof a;
        memset(&a, 0, sizeof a);
        int ok = send ? getpeername(fd, (struct sockaddr *)&a, &len) : getsockname(fd, (struct sockaddr *)&a, &len);
        return ok == 0 ? inet_end(&a, len) : 0;
    }
    return 0;
}

static void syscall_cb(qemu_plugin_id_t id, unsigned int vcpu, int64_t num, uint64_t a1, uint64_t a2,
                       uint64_t a3, uint64_t a4, uint64_t a5, uint64_t a6, uint64_t a7, uint64_t a8)
{
    (void)id, (void)a7, (void)a8;
    struct buf *b = get_buf(vcpu);
    finish_block(b);
    b->sc_num = num;
    b->sc_a[0] = a1, b->sc_a[1] = a2, b->sc_a[2] = a3, b->sc_a[3] = a4, b->sc_a[4] = a5, b->sc_a[5] = a6;
    if (num == SYS_EXECVE || num == SYS_EXECVEAT) {
        ev_exec_call(b, num == SYS_EXECVE ? a1 : a2);
    }
    {
        /* Every call: its number and, for calls that move a buffer through a descriptor, the
           descriptor's kind and object (the guest's descriptors are the host's), the buffer and
           its length. fd byte: 1 file, 2 pipe, 3 socket; 0x10 the call fills the buffer, 0x20 it
           sends it. madvise(addr, length, MADV_HUGEPAGE) names its region as the buffer (no
           descriptor); other advice names none. */
        uint8_t fd = 0;
        uint64_t dev = 0, ino = 0, buf = 0, len = 0;
        bool into = num == SYS_READ || num == SYS_PREAD64 || num == SYS_RECVFROM || num == SYS_READV ||
                    num == SYS_RECVMSG;
        bool from = num == SYS_WRITE || num == SYS_PWRITE64 || num == SYS_SENDTO || num == SYS_WRITEV ||
                    num == SYS_SENDMSG;
        struct stat st;
        if ((into || from) && fstat((int)a1, &st) == 0) {
            fd = S_ISFIFO(st.st_mode) ? 2 : S_ISSOCK(st.st_mode) ? 3 : 1;
            fd |= into ? 0x10 : 0x20;
            dev = (uint64_t)st.st_dev, ino = (uint64_t)st.st_ino;
            if (num != SYS_READV && num != SYS_WRITEV && num != SYS_RECVMSG && num != SYS_SENDMSG) {
                buf = a2, len = a3;
            }
        } else if (num == SYS_MADVISE && a3 == MADV_HUGEPAGE) {
            buf = a1, len = a2;
        }
        room(b, 38);
        put8(b, R_SYSCALL);
        put32(b, (uint32_t)num);
        put8(b, fd);
        put64(b, dev);
        put64(b, ino);
        put64(b, buf);
        put64(b, len);
    }
    if (num == SYS_READ || num == SYS_READV || num == SYS_RECVFROM || num == SYS_RECVMSG || num == SYS_WRITE ||
        num == SYS_WRITEV || num == SYS_SENDTO || num == SYS_SENDMSG) {
        /* Communication through a pipe or a connected socket: who receives from which channel
           end, and who sends how much to which. */
        bool send = num == SYS_WRITE || num == SYS_WRITEV || num == SYS_SENDTO || num == SYS_SENDMSG;
        struct stat st;
        bool known = fstat((int)a1, &st) == 0;
        uint64_t end = known ? channel_end((int)a1, &st, send) : 0;
        if (end != 0) {
            room(b, 13);
            put8(b, send ? R_PIPE_SEND : R_PIPE_RECV);
            put64(b, end);
            if (send) {
                bool sized = num == SYS_WRITE || num == SYS_SENDTO;
                put32(b, sized ? (uint32_t)(a3 > 0xffffffffu ? 0xffffffffu : a3) : 0);
            }
        }
        if (send && known && (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))) {
            /* A message may wake its receiver, whose records must not reach xlat before the
               sender's records up to the send: the scheduler runs processes in the order their
               records arrive where nothing else orders them. */
            flush(b);
        }
    }
    if (yields(num, a1, a2)) {
        /* A scheduling point; what is buffered goes out before the process may block. */
        room(b, 1);
        put8(b, R_YIELD);
        flush(b);
    }
    if (num == SYS_FUTEX) {
        uint64_t op = a2 & 0x7f;
        if (op == 1 /* FUTEX_WAKE */ || op == 5 /* FUTEX_WAKE_OP */ || op == 10 /* FUTEX_WAKE_BITSET */) {
            /* A thread wakes another (a lock released, a condition signalled): its references
               up to here go out before the woken thread's, which may unmap what they touched. */
            flush(b);
        }
    }
    if (is_fork(num, a1) || num == SYS_CLONE || num == SYS_EXECVE || num == SYS_EXECVEAT || num == SYS_EXIT ||
        num == SYS_EXIT_GROUP) {
        /* Nothing buffered may be inherited by a child, lost with a replaced image or a thread. */
        flush(b);
    }
}

static void syscall_ret_cb(qemu_plugin_id_t id, unsigned int vcpu, int64_t num, int64_t ret)
{
    (void)id;
    struct buf *b = get_buf(vcpu);
    if (num != b->sc_num) {
        return;
    }
    const uint64_t *a = b->sc_a;
    bool ok = !(ret < 0 && ret >= -4095);
    switch (num) {
    case SYS_MMAP:
        if (ok) {
            uint32_t f = ((a[2] & PROT_READ) ? 1 : 0) | ((a[2] & PROT_WRITE) ? 2 : 0) |
                         ((a[2] & PROT_EXEC) ? 4 : 0) | ((a[3] & MAP_SHARED) ? 8 : 0) |
                         (!(a[3] & MAP_ANONYMOUS) && (int64_t)a[4] >= 0 ? 64 : 0);
            ev_object(b, a[3], a[4], a[5]);
            ev_map(b, (uint64_t)ret, page_up(a[1]), f);
        }
        break;
    case SYS_MUNMAP:
        if (ok) {
            ev_unmap(b, a[0], page_up(a[1]));
            /* An address-space change goes out at once, behind this thread's references before
               it: other threads' later references to the range must not reach xlat first. */
            flush(b);
        }
        break;
    case SYS_MREMAP:
        if (ok) {
            /* Resized in place: only the tail changes. Moved: the old range goes and the new one
               is mapped afresh (its pages fault again in the models; docs/tracing.md). */
            uint64_t ol = page_up(a[1]), nl = page_up(a[2]);
            if ((uint64_t)ret == a[0] && nl >= ol) {
                if (nl > ol) {
                    ev_map(b, a[0] + ol, nl - ol, 1 | 2);
                }
            } else if ((uint64_t)ret == a[0]) {
                ev_unmap(b, a[0] + nl, ol - nl);
            } else {
                ev_unmap(b, a[0], ol);
                ev_map(b, (uint64_t)ret, nl, 1 | 2);
            }
            flush(b);
        }
        break;
    case SYS_MPROTECT:
    case SYS_PKEY_MPROTECT:
        if (ok) {
            ev_protect(b, a[0], page_up(a[1]), a[2]);
            flush(b);
        }
        break;
    case SYS_MADVISE:
        if (ok && (a[2] == MADV_DONTNEED || a[2] == MADV_REMOVE || a[2] == MADV_DONTNEED_LOCKED || a[2] == MADV_FREE)) {
            ev_discard(b, a[0], page_up(a[1]), a[2] == MADV_FREE);
            flush(b);
        }
        break;
    case SYS_EXECVE:
    case SYS_EXECVEAT:
        /* Only a failed exec returns here. */
        room(b, 1);
        put8(b, R_EXEC_FAIL);
        flush(b);
        break;
    case SYS_BRK: {
        uint64_t nb = page_up((uint64_t)ret);
        if (brk_cur != 0 && nb > brk_cur) {
            ev_map(b, brk_cur, nb - brk_cur, 1 | 2 | 16);
        } else if (brk_cur != 0 && nb < brk_cur) {
            ev_unmap(b, nb, brk_cur - nb);
        }
        brk_cur = nb;
        break;
    }
    default:
        if ((num == SYS_FORK || num == SYS_VFORK || num == SYS_CLONE) && ok) {
            uint32_t me = ret == 0 ? (uint32_t)getpid() : cur_pid;
            if (ret == 0 && me != cur_pid) {
                /* The child: its own records from here on. */
                uint32_t parent = cur_pid;
                cur_pid = me;
                my_tid = 0; /* the parent's, inherited */
                b->len = HEADER;
                b->owner = me;
                b->tid = current_tid();
                b->cur = NULL;
                room(b, 5);
                put8(b, R_START);
                put32(b, parent);
                flush(b);
            } else if (ret > 0 && is_fork(num, a[0])) {
                room(b, 5);
                put8(b, R_FORK);
                put32(b, (uint32_t)ret);
                flush(b);
            }
        }
        break;
    }
}

static void at_exit(qemu_plugin_id_t id, void *ud)
{
    (void)id, (void)ud;
    /* Every thread's buffer of this process (not those inherited from a parent at fork). */
    for (struct buf *o = all_bufs; o; o = o->next) {
        if (o->owner == cur_pid) {
            finish_block(o);
            flush(o);
        }
    }
    static struct buf last;
    last.len = HEADER;
    last.owner = cur_pid;
    last.tid = (uint32_t)syscall(SYS_gettid);
    put8(&last, R_EXIT);
    flush(&last);
}

XP_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    const char *path = NULL;
    bool exec_image = false;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "fifo=", 5) == 0) {
            path = argv[i] + 5;
        } else if (strcmp(argv[i], "exec=1") == 0) {
            /* Started by the exec shim (xlat_exec_shim.c): this process replaced its image. */
            exec_image = true;
        }
    }
    if (!path) {
        fprintf(stderr, "xlat plugin: missing the fifo=PATH argument\n");
        return -1;
    }
    if (info && info->target_name && strcmp(info->target_name, "x86_64") != 0) {
        fprintf(stderr, "xlat plugin: only x86_64 guests are supported, not %s\n", info->target_name);
        return -1;
    }
    /* A new image opens without blocking: if xlat stopped reading, it fails instead of waiting. */
    int fd = open(path, O_WRONLY | O_CLOEXEC | (exec_image ? O_NONBLOCK : 0));
    if (fd < 0) {
        die("cannot open the trace FIFO");
    }
    if (exec_image) {
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    }
    /* Out of the way of the guest's own descriptors (it shares the descriptor table). */
    struct rlimit rl;
    int low = 700;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (rlim_t)low + 16 > rl.rlim_cur) {
        low = rl.rlim_cur > 64 ? (int)rl.rlim_cur - 16 : 3;
    }
    int high = fcntl(fd, F_DUPFD_CLOEXEC, low);
    if (high >= 0) {
        close(fd);
        fd = high;
    }
    out_fd = fd;
    cur_pid = (uint32_t)getpid();
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_vcpu_syscall_cb(id, syscall_cb);
    qemu_plugin_register_vcpu_syscall_ret_cb(id, syscall_ret_cb);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    if (exec_image) {
        /* Announce the new image before any of its records. */
        static struct buf first;
        first.len = HEADER;
        first.owner = cur_pid;
        first.tid = (uint32_t)syscall(SYS_gettid);
        put8(&first, R_EXEC);
        flush(&first);
    }
    return 0;
}
