/*
 * xlat's exec shim: an LD_PRELOAD library for the guest programs of `xlat trace --children`
 * with the QEMU backend (docs/tracing.md, "Following execve").
 *
 * QEMU user mode does not follow execve: an exec'd program would run natively, untraced. This
 * library, preloaded into every traced (dynamically linked) program, wraps the C library's exec
 * entry points (execve, execv, execvp, execvpe, execl, execle, execlp, fexecve, posix_spawn,
 * posix_spawnp) and runs the new program as
 *
 *     qemu-x86_64 -plugin PLUGIN,fifo=PATH,exec=1 -E LD_PRELOAD=SHIM[:...] -0 ARGV0 -- PROGRAM ARGS
 *
 * with the caller's environment (the shim re-armed for the guest, not loaded into QEMU itself).
 * The plugin instance started with exec=1 announces the new image of the process on the stream.
 * A `#!` script becomes its interpreter plus the script's path; a file that is neither an x86-64
 * ELF file nor a script, or that cannot be read, is handed to the real call unchanged (which
 * fails as it should, or runs it natively).
 *
 * Configuration comes from the environment: XLAT_EXEC_QEMU (QEMU's path), XLAT_EXEC_PLUGIN (the
 * plugin argument `SO,fifo=PATH`) and XLAT_EXEC_SHIM (this library's path). They are read once at
 * load time and put back into environments that lack them. The shim is inert when those are
 * missing or when the process does not run under QEMU's TCG (a program exec'd natively by a
 * statically linked one inherits LD_PRELOAD but is not traced, nor are its children).
 *
 * No allocation: the wrappers may run in a vfork child. Arrays live on the stack.
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define XS_EXPORT __attribute__((visibility("default")))
#define BUFSZ 4096

extern char **environ;

static bool active;
static char qemu[BUFSZ], plugin[BUFSZ], shim[BUFSZ];
/* Environment strings put back when missing. */
static char env_qemu[BUFSZ + 32], env_plugin[BUFSZ + 32], env_shim[BUFSZ + 32];

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *, const posix_spawnattr_t *,
                        char *const[], char *const[]);
static execve_fn real_execve;
static spawn_fn real_spawn;

/* True under QEMU's TCG: its CPU names itself "QEMU TCG CPU". */
static bool under_tcg(void)
{
    unsigned r[12];
    for (unsigned i = 0; i < 3; i++) {
        if (!__get_cpuid(0x80000002 + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3])) {
            return false;
        }
    }
    char brand[49];
    memcpy(brand, r, 48);
    brand[48] = 0;
    return strstr(brand, "QEMU TCG CPU") != NULL;
}

static bool copy_env(const char *name, char *dst)
{
    const char *v = getenv(name);
    if (!v || !*v || strlen(v) >= BUFSZ) {
        return false;
    }
    strcpy(dst, v);
    return true;
}

__attribute__((constructor)) static void shim_init(void)
{
    real_execve = (execve_fn)dlsym(RTLD_NEXT, "execve");
    real_spawn = (spawn_fn)dlsym(RTLD_NEXT, "posix_spawn");
    if (!real_execve || !real_spawn) {
        return;
    }
    if (!copy_env("XLAT_EXEC_QEMU", qemu) || !copy_env("XLAT_EXEC_PLUGIN", plugin) ||
        !copy_env("XLAT_EXEC_SHIM", shim)) {
        return;
    }
    snprintf(env_qemu, sizeof env_qemu, "XLAT_EXEC_QEMU=%s", qemu);
    snprintf(env_plugin, sizeof env_plugin, "XLAT_EXEC_PLUGIN=%s", plugin);
    snprintf(env_shim, sizeof env_shim, "XLAT_EXEC_SHIM=%s", shim);
    active = under_tcg();
}

/* ---- what to run ---- */

enum kind { K_NATIVE, K_ELF, K_SCRIPT };

struct target {
    enum kind kind;
    char interp[BUFSZ]; /* K_SCRIPT: the interpreter */
    char iarg[BUFSZ];   /* K_SCRIPT: its optional argument ("" if none) */
};

/* Classifies `path`: an x86-64 ELF file, a `#!` script, or something for the real call. */
static void classify(const char *path, struct target *t)
{
    t->kind = K_NATIVE;
    if (access(path, X_OK) != 0) {
        return;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return;
    }
    unsigned char h[BUFSZ];
    ssize_t n = read(fd, h, sizeof h - 1);
    close(fd);
    if (n >= 20 && memcmp(h, "\177ELF", 4) == 0) {
        /* 64-bit, little-endian, e_machine 62 (x86-64). */
        if (h[4] == 2 && h[5] == 1 && h[18] == 62 && h[19] == 0) {
            t->kind = K_ELF;
        }
        return;
    }
    if (n >= 3 && h[0] == '#' && h[1] == '!') {
        h[n] = 0;
        char *line = (char *)h + 2;
        char *end = strchr(line, '\n');
        if (!end) {
            return; /* the line does not fit: leave it to the kernel */
        }
        *end = 0;
        while (*line == ' ' || *line == '\t') {
            line++;
        }
        char *sp = line + strcspn(line, " \t");
        char *arg = sp;
        if (*sp) {
            *sp = 0;
            arg = sp + 1;
            while (*arg == ' ' || *arg == '\t') {
                arg++;
            }
            size_t al = strlen(arg);
            while (al > 0 && (arg[al - 1] == ' ' || arg[al - 1] == '\t' || arg[al - 1] == '\r')) {
                arg[--al] = 0;
            }
        }
        if (!*line) {
            return;
        }
        struct target inner;
        classify(line, &inner);
        if (inner.kind != K_ELF) {
            return; /* a script interpreted by a script, or by a foreign binary */
        }
        snprintf(t->interp, sizeof t->interp, "%s", line);
        snprintf(t->iarg, sizeof t->iarg, "%s", arg);
        t->kind = K_SCRIPT;
    }
}

static size_t count(char *const v[])
{
    size_t n = 0;
    while (v && v[n]) {
        n++;
    }
    return n;
}

/* The QEMU command line for running `path` with `argv`: fills `out` (room for argc + 16). */
static void qemu_argv(const char *path, char *const argv[], const struct target *t, char *plugin_arg,
                      char *preload, char **out)
{
    size_t k = 0;
    out[k++] = qemu;
    out[k++] = "-plugin";
    out[k++] = plugin_arg;
    out[k++] = "-E";
    out[k++] = preload;
    if (t->kind == K_SCRIPT) {
        out[k++] = "--";
        out[k++] = (char *)t->interp;
        if (t->iarg[0]) {
            out[k++] = (char *)t->iarg;
        }
        out[k++] = (char *)path;
    } else {
        if (argv && argv[0]) {
            out[k++] = "-0";
            out[k++] = argv[0];
        }
        out[k++] = "--";
        out[k++] = (char *)path;
    }
    for (size_t i = 1; argv && argv[0] && argv[i]; i++) {
        out[k++] = argv[i];
    }
    out[k] = NULL;
}

/* The environment for QEMU: `envp` without LD_PRELOAD (QEMU itself must not load the shim),
   with the XLAT_EXEC_* variables; `preload` gets the guest's LD_PRELOAD (the shim first). */
static void qemu_env(char *const envp[], char **out, char *preload, size_t preload_size)
{
    size_t k = 0;
    bool have_q = false, have_p = false, have_s = false;
    const char *other = NULL;
    for (size_t i = 0; envp && envp[i]; i++) {
        const char *e = envp[i];
        if (strncmp(e, "LD_PRELOAD=", 11) == 0) {
            other = e + 11;
            continue;
        }
        have_q |= strncmp(e, "XLAT_EXEC_QEMU=", 15) == 0;
        have_p |= strncmp(e, "XLAT_EXEC_PLUGIN=", 17) == 0;
        have_s |= strncmp(e, "XLAT_EXEC_SHIM=", 15) == 0;
        out[k++] = (char *)e;
    }
    if (!have_q) {
        out[k++] = env_qemu;
    }
    if (!have_p) {
        out[k++] = env_plugin;
    }
    if (!have_s) {
        out[k++] = env_shim;
    }
    out[k] = NULL;
    /* Keep the caller's other preloaded libraries (not the shim twice). */
    int n = snprintf(preload, preload_size, "LD_PRELOAD=%s", shim);
    if (other && n > 0 && (size_t)n < preload_size) {
        const char *p = other;
        while (*p) {
            size_t len = strcspn(p, ": ");
            if (len > 0 && !(len == strlen(shim) && strncmp(p, shim, len) == 0)) {
                int m = snprintf(preload + n, preload_size - (size_t)n, ":%.*s", (int)len, p);
                if (m < 0 || (size_t)(n + m) >= preload_size) {
                    break;
                }
                n += m;
            }
            p += len;
            while (*p == ':' || *p == ' ') {
                p++;
            }
        }
    }
}

/* execve or posix_spawn of `path` under QEMU when it can be traced, else the real call. */
static int run(pid_t *pid, const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *attr, const char *path,
               char *const argv[], char *const envp[])
{
    struct target t;
    if (active) {
        classify(path, &t);
    }
    if (!active || t.kind == K_NATIVE) {
        return pid ? real_spawn(pid, path, fa, attr, argv, envp) : real_execve(path, argv, envp);
    }
    char plugin_arg[BUFSZ + 16];
    snprintf(plugin_arg, sizeof plugin_arg, "%s,exec=1", plugin);
    char preload[2 * BUFSZ];
    char *args[count(argv) + 16];
    char *env[count(envp) + 8];
    qemu_env(envp, env, preload, sizeof preload);
    qemu_argv(path, argv, &t, plugin_arg, preload, args);
    if (pid) {
        return real_spawn(pid, qemu, fa, attr, args, env);
    }
    return real_execve(qemu, args, env);
}

/* Looks `file` up on PATH as execvp does (no '/': each PATH entry; the first executable regular
   file). Returns false (errno set) when none is found. */
static bool search_path(const char *file, char *out, size_t size)
{
    if (strchr(file, '/')) {
        snprintf(out, size, "%s", file);
        return true;
    }
    if (!*file) {
        errno = ENOENT;
        return false;
    }
    const char *path = getenv("PATH");
    if (!path) {
        path = "/bin:/usr/bin";
    }
    int err = ENOENT;
    for (const char *p = path;; p++) {
        const char *q = strchrnul(p, ':');
        int n = q == p ? snprintf(out, size, "%s", file) : snprintf(out, size, "%.*s/%s", (int)(q - p), p, file);
        if (n > 0 && (size_t)n < size) {
            if (access(out, X_OK) == 0) {
                int fd = open(out, O_RDONLY | O_CLOEXEC);
                if (fd >= 0) {
                    close(fd);
                    return true;
                }
            } else if (errno == EACCES) {
                err = EACCES;
            }
        }
        if (!*q) {
            break;
        }
        p = q;
    }
    errno = err;
    return false;
}

/* ---- the wrapped entry points ---- */

XS_EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    return run(NULL, NULL, NULL, path, argv, envp);
}

XS_EXPORT int execv(const char *path, char *const argv[])
{
    return run(NULL, NULL, NULL, path, argv, environ);
}

XS_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    char path[PATH_MAX];
    if (!active || !search_path(file, path, sizeof path)) {
        typedef int (*fn)(const char *, char *const[], char *const[]);
        fn real = (fn)dlsym(RTLD_NEXT, "execvpe");
        return real ? real(file, argv, envp) : -1;
    }
    run(NULL, NULL, NULL, path, argv, envp);
    if (errno == ENOEXEC) {
        /* As the C library does: a file that is no program is run by the shell. */
        size_t n = count(argv);
        char *sh[n + 3];
        sh[0] = "/bin/sh";
        sh[1] = path;
        for (size_t i = 1; i <= n; i++) {
            sh[i + 1] = argv[i];
        }
        if (n == 0) {
            sh[2] = NULL;
        }
        run(NULL, NULL, NULL, "/bin/sh", sh, envp);
    }
    return -1;
}

XS_EXPORT int execvp(const char *file, char *const argv[])
{
    return execvpe(file, argv, environ);
}

/* The variadic forms: collect the arguments on the stack. */
#define COLLECT(first, ap, args, extra)                                                                             \
    size_t n_ = 1;                                                                                                  \
    va_start(ap, first);                                                                                            \
    while (va_arg(ap, char *)) {                                                                                    \
        n_++;                                                                                                       \
    }                                                                                                               \
    va_end(ap);                                                                                                     \
    char *args[n_ + 1];                                                                                             \
    args[0] = (char *)first;                                                                                        \
    va_start(ap, first);                                                                                            \
    for (size_t i_ = 1; i_ <= n_; i_++) {                                                                           \
        args[i_] = va_arg(ap, char *);                                                                              \
    }                                                                                                               \
    extra;                                                                                                          \
    va_end(ap)

XS_EXPORT int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    COLLECT(arg, ap, args, (void)0);
    return execv(path, args);
}

XS_EXPORT int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    COLLECT(arg, ap, args, (void)0);
    return execvp(file, args);
}

XS_EXPORT int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    char *const *envp;
    COLLECT(arg, ap, args, envp = va_arg(ap, char *const *));
    return execve(path, args, envp);
}

XS_EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    char link[64], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = active ? readlink(link, path, sizeof path - 1) : -1;
    if (n > 0 && path[0] == '/') {
        path[n] = 0;
        struct target t;
        classify(path, &t);
        if (t.kind != K_NATIVE) {
            return run(NULL, NULL, NULL, path, argv, envp);
        }
    }
    typedef int (*fn)(int, char *const[], char *const[]);
    fn real = (fn)dlsym(RTLD_NEXT, "fexecve");
    return real ? real(fd, argv, envp) : -1;
}

XS_EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                          const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    pid_t ignored;
    return run(pid ? pid : &ignored, fa, attr, path, argv, envp);
}

XS_EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                           const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    char path[PATH_MAX];
    if (!active || !search_path(file, path, sizeof path)) {
        spawn_fn real = (spawn_fn)dlsym(RTLD_NEXT, "posix_spawnp");
        return real ? real(pid, file, fa, attr, argv, envp) : errno;
    }
    return posix_spawn(pid, path, fa, attr, argv, envp);
}
