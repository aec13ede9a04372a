/* The clock shim's waits: sleeps, waits for file descriptors, absolute deadlines
 * (conditions, semaphores, locks, joins, futexes). See vt.c. */
#include "vt_internal.h"

/* --- sleeping ------------------------------------------------------------------------ */

/* Sleep until the virtual time on family fam reaches deadline, in chunks; on a
 * signal, return EINTR with *left the virtual time still to go. */
static int sleep_until(clockid_t c, int fam, int64_t deadline, int64_t *left)
{
    struct vt_view v;
    for (;;) {
        if (!vt_view(&v)) { /* undilated now: one real wait */
            struct timespec t = ns_ts(deadline);
            int r = real_clock_nanosleep(c, TIMER_ABSTIME, &t, NULL);
            if (r == EINTR && left)
                *left = deadline - real_now(c);
            return r;
        }
        int64_t now = virt_now(&v, fam);
        if (now >= deadline)
            return 0;
        int64_t real_left = (int64_t)((double)(deadline - now) * v.tdf);
        if (real_left > CHUNK_NS)
            real_left = CHUNK_NS;
        struct timespec t = ns_ts(real_left);
        int r = real_clock_nanosleep(CLOCK_MONOTONIC, 0, &t, NULL);
        if (r == EINTR) {
            if (left)
                *left = deadline - virt_now(&v, fam);
            return EINTR;
        }
        if (r != 0)
            return r;
    }
}

int clock_nanosleep(clockid_t c, int flags, const struct timespec *req, struct timespec *rem)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    int fam = family(c);
    if (!vt_view(&v) || fam == FAM_NONE || fam == FAM_CPU)
        return real_clock_nanosleep(c, flags, req, rem);
    if (req->tv_nsec < 0 || req->tv_nsec >= NS)
        return EINVAL;
    int64_t deadline = (flags & TIMER_ABSTIME) ? ts_ns(req) : virt_now(&v, fam) + ts_ns(req);
    int64_t left = 0;
    int r = sleep_until(c, fam, deadline, &left);
    if (r == EINTR && rem && !(flags & TIMER_ABSTIME))
        *rem = ns_ts(left > 0 ? left : 0);
    return r;
}

int nanosleep(const struct timespec *req, struct timespec *rem)
{
    int r = clock_nanosleep(CLOCK_MONOTONIC, 0, req, rem);
    if (r) {
        errno = r;
        return -1;
    }
    return 0;
}

unsigned sleep(unsigned seconds)
{
    struct timespec t = {.tv_sec = seconds, .tv_nsec = 0}, rem = {0, 0};
    if (nanosleep(&t, &rem) < 0)
        return (unsigned)rem.tv_sec + (rem.tv_nsec > 0);
    return 0;
}

int usleep(useconds_t us)
{
    struct timespec t = ns_ts((int64_t)us * 1000);
    return nanosleep(&t, NULL);
}

/* --- waiting for file descriptors ---------------------------------------------------- */

/* The real milliseconds of the next chunk of a wait whose virtual deadline is given
 * (monotonic); -2: the deadline passed. */
static int chunk_ms(struct vt_view *v, int64_t deadline)
{
    int64_t now = virt_now(v, FAM_MONOTONIC);
    if (now >= deadline)
        return -2;
    int64_t real_left = (int64_t)((double)(deadline - now) * v->tdf);
    if (real_left > CHUNK_NS)
        real_left = CHUNK_NS;
    return (int)((real_left + 999999) / 1000000);
}

int poll(struct pollfd *fds, nfds_t n, int timeout)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (timeout <= 0 || !vt_view(&v))
        return real_poll(fds, n, timeout);
    int64_t deadline = virt_now(&v, FAM_MONOTONIC) + (int64_t)timeout * 1000000;
    for (;;) {
        int ms = chunk_ms(&v, deadline);
        if (ms == -2)
            return 0;
        int r = real_poll(fds, n, ms);
        if (r != 0)
            return r;
        vt_view(&v);
    }
}

int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *tmo, const sigset_t *mask)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!tmo || ts_ns(tmo) <= 0 || !vt_view(&v))
        return real_ppoll(fds, n, tmo, mask);
    int64_t deadline = virt_now(&v, FAM_MONOTONIC) + ts_ns(tmo);
    for (;;) {
        int ms = chunk_ms(&v, deadline);
        if (ms == -2)
            return 0;
        struct timespec t = ns_ts((int64_t)ms * 1000000);
        int r = real_ppoll(fds, n, &t, mask);
        if (r != 0)
            return r;
        vt_view(&v);
    }
}

static int select_loop(int n, fd_set *r, fd_set *w, fd_set *e, int64_t timeout_ns,
                       const sigset_t *mask, int with_mask)
{
    struct vt_view v;
    vt_view(&v);
    fd_set r0, w0, e0;
    if (r)
        r0 = *r;
    if (w)
        w0 = *w;
    if (e)
        e0 = *e;
    int64_t deadline = virt_now(&v, FAM_MONOTONIC) + timeout_ns;
    for (;;) {
        int ms = chunk_ms(&v, deadline);
        if (ms == -2) {
            if (r)
                FD_ZERO(r);
            if (w)
                FD_ZERO(w);
            if (e)
                FD_ZERO(e);
            return 0;
        }
        if (r)
            *r = r0;
        if (w)
            *w = w0;
        if (e)
            *e = e0;
        int got;
        if (with_mask) {
            struct timespec t = ns_ts((int64_t)ms * 1000000);
            got = real_pselect(n, r, w, e, &t, mask);
        } else {
            struct timeval t = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000};
            got = real_select(n, r, w, e, &t);
        }
        if (got != 0)
            return got;
        vt_view(&v);
    }
}

int select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!tv || (tv->tv_sec == 0 && tv->tv_usec == 0) || !vt_view(&v))
        return real_select(n, r, w, e, tv);
    int got = select_loop(n, r, w, e, tv->tv_sec * NS + tv->tv_usec * 1000LL, NULL, 0);
    if (got == 0)
        tv->tv_sec = tv->tv_usec = 0;
    return got;
}

int pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t, const sigset_t *m)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!t || ts_ns(t) <= 0 || !vt_view(&v))
        return real_pselect(n, r, w, e, t, m);
    return select_loop(n, r, w, e, ts_ns(t), m, 1);
}

static int epoll_loop(int ep, struct epoll_event *ev, int max, int timeout, const sigset_t *m,
                      int with_mask)
{
    struct vt_view v;
    if ((timeout <= 0) || !vt_view(&v))
        return with_mask ? real_epoll_pwait(ep, ev, max, timeout, m)
                         : real_epoll_wait(ep, ev, max, timeout);
    int64_t deadline = virt_now(&v, FAM_MONOTONIC) + (int64_t)timeout * 1000000;
    for (;;) {
        int ms = chunk_ms(&v, deadline);
        if (ms == -2)
            return 0;
        int r = with_mask ? real_epoll_pwait(ep, ev, max, ms, m) : real_epoll_wait(ep, ev, max, ms);
        if (r != 0)
            return r;
        vt_view(&v);
    }
}

int epoll_wait(int ep, struct epoll_event *ev, int max, int timeout)
{
    if (!inited)
        vt_init();
    return epoll_loop(ep, ev, max, timeout, NULL, 0);
}

int epoll_pwait(int ep, struct epoll_event *ev, int max, int timeout, const sigset_t *m)
{
    if (!inited)
        vt_init();
    return epoll_loop(ep, ev, max, timeout, m, 1);
}

/* --- absolute deadlines ------------------------------------------------------------- */

/* Absolute waits wait in chunks of at most CHUNK_NS of real time, each converted with
 * the factor then in force, so that they follow a TDF change. A chunk that ends
 * before the virtual deadline is waited again (semaphores, locks, joins, futexes:
 * their state is in the object, nothing is lost in between) or, for a condition
 * variable, returns as a spurious wakeup (0): waiting again inside would lose a
 * signal sent, without the mutex, between the two waits; POSIX callers re-check
 * their predicate and wait again anyway. */

/* The real absolute time on clock c at which the next chunk of a wait for virtual
 * time abs on c ends. */
static struct timespec chunk_deadline(struct vt_view *v, clockid_t c, const struct timespec *abs)
{
    int fam = family(c);
    vt_view(v);
    if (fam == FAM_NONE || fam == FAM_CPU)
        return *abs;
    int64_t real = to_real(v, fam, ts_ns(abs));
    int64_t now = real_now(c);
    return ns_ts(real - now > CHUNK_NS ? now + CHUNK_NS : real);
}

/* Whether virtual time on clock c has reached abs. */
static int reached(struct vt_view *v, clockid_t c, const struct timespec *abs)
{
    int fam = family(c);
    if (fam == FAM_NONE || fam == FAM_CPU)
        return 1;
    return virt_now(v, fam) >= ts_ns(abs);
}

static int cond_wait(pthread_cond_t *cond, pthread_mutex_t *mutex, clockid_t c,
                     const struct timespec *abs, int clockwait)
{
    struct vt_view v;
    struct timespec t = chunk_deadline(&v, c, abs);
    int r = clockwait ? real_cond_clockwait(cond, mutex, c, &t)
                      : real_cond_timedwait(cond, mutex, &t);
    if (r == ETIMEDOUT && !reached(&v, c, abs))
        return 0; /* a spurious wakeup, at a chunk's end */
    return r;
}

int pthread_cond_timedwait(pthread_cond_t *restrict cond, pthread_mutex_t *restrict mutex,
                           const struct timespec *restrict abs)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!vt_view(&v))
        return real_cond_timedwait(cond, mutex, abs);
    /* glibc keeps the condition's clock in bit 0 of __wrefs (1: monotonic). */
    clockid_t c = (cond->__data.__wrefs & 1) ? CLOCK_MONOTONIC : CLOCK_REALTIME;
    return cond_wait(cond, mutex, c, abs, 0);
}

int pthread_cond_clockwait(pthread_cond_t *restrict cond, pthread_mutex_t *restrict mutex,
                           clockid_t c, const struct timespec *restrict abs)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!vt_view(&v))
        return real_cond_clockwait(cond, mutex, c, abs);
    return cond_wait(cond, mutex, c, abs, 1);
}

static int sem_wait_on(sem_t *sem, clockid_t c, const struct timespec *abs, int clockwait)
{
    struct vt_view v;
    for (;;) {
        struct timespec t = chunk_deadline(&v, c, abs);
        int r = clockwait ? real_sem_clockwait(sem, c, &t) : real_sem_timedwait(sem, &t);
        if (r == 0 || errno != ETIMEDOUT || reached(&v, c, abs))
            return r;
    }
}

int sem_timedwait(sem_t *restrict sem, const struct timespec *restrict abs)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!vt_view(&v))
        return real_sem_timedwait(sem, abs);
    return sem_wait_on(sem, CLOCK_REALTIME, abs, 0);
}

int sem_clockwait(sem_t *restrict sem, clockid_t c, const struct timespec *restrict abs)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!vt_view(&v))
        return real_sem_clockwait(sem, c, abs);
    return sem_wait_on(sem, c, abs, 1);
}

int pthread_mutex_timedlock(pthread_mutex_t *restrict m, const struct timespec *restrict abs)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!vt_view(&v))
        return real_mutex_timedlock(m, abs);
    for (;;) {
        struct timespec t = chunk_deadline(&v, CLOCK_REALTIME, abs);
        int r = real_mutex_timedlock(m, &t);
        if (r != ETIMEDOUT || reached(&v, CLOCK_REALTIME, abs))
            return r;
    }
}

int pthread_timedjoin_np(pthread_t th, void **ret, const struct timespec *abs)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!abs || !vt_view(&v))
        return real_timedjoin(th, ret, abs);
    for (;;) {
        struct timespec t = chunk_deadline(&v, CLOCK_REALTIME, abs);
        int r = real_timedjoin(th, ret, &t);
        if (r != ETIMEDOUT || reached(&v, CLOCK_REALTIME, abs))
            return r;
    }
}

/* futex through syscall(): FUTEX_WAIT takes a relative timeout, FUTEX_WAIT_BITSET and
 * FUTEX_LOCK_PI2 an absolute one on CLOCK_MONOTONIC (or CLOCK_REALTIME with
 * FUTEX_CLOCK_REALTIME), FUTEX_LOCK_PI an absolute one on CLOCK_REALTIME. The word is
 * compared again at every chunk, so no wakeup is lost between two. */
long syscall(long number, ...)
{
    va_list ap;
    long a[6];
    if (!inited)
        vt_init();
    va_start(ap, number);
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    struct vt_view v;
    if (number != SYS_futex || !a[3] || !vt_view(&v))
        return real_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
    int op = (int)a[1] & FUTEX_CMD_MASK;
    const struct timespec *tmo = (const struct timespec *)a[3];
    clockid_t c;
    struct timespec abs;
    if (op == FUTEX_WAIT) {
        c = CLOCK_MONOTONIC;
        abs = ns_ts(virt_now(&v, FAM_MONOTONIC) + ts_ns(tmo));
    } else if (op == FUTEX_WAIT_BITSET || op == FUTEX_LOCK_PI || op == FUTEX_LOCK_PI2) {
        c = (((int)a[1] & FUTEX_CLOCK_REALTIME) || op == FUTEX_LOCK_PI) ? CLOCK_REALTIME
                                                                          : CLOCK_MONOTONIC;
        abs = *tmo;
    } else {
        return real_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
    }
    for (;;) {
        struct timespec t = chunk_deadline(&v, c, &abs);
        if (op == FUTEX_WAIT) { /* relative, on CLOCK_MONOTONIC */
            int64_t left = ts_ns(&t) - real_now(CLOCK_MONOTONIC);
            t = ns_ts(left > 0 ? left : 0);
        }
        long r = real_syscall(number, a[0], a[1], a[2], (long)&t, a[4], a[5]);
        if (r != -1 || errno != ETIMEDOUT || reached(&v, c, &abs))
            return r;
    }
}

/* --- signals ------------------------------------------------------------------------ */

static int (*real_sigtimedwait)(const sigset_t *, siginfo_t *, const struct timespec *);

int sigtimedwait(const sigset_t *restrict set, siginfo_t *restrict info,
                 const struct timespec *restrict tmo)
{
    struct vt_view v;
    if (!inited)
        vt_init();
    if (!__atomic_load_n(&real_sigtimedwait, __ATOMIC_ACQUIRE))
        __atomic_store_n(&real_sigtimedwait,
                         (__typeof__(real_sigtimedwait))dlsym(RTLD_NEXT, "sigtimedwait"),
                         __ATOMIC_RELEASE);
    if (!tmo || ts_ns(tmo) <= 0 || !vt_view(&v))
        return real_sigtimedwait(set, info, tmo);
    int64_t deadline = virt_now(&v, FAM_MONOTONIC) + ts_ns(tmo);
    for (;;) {
        int ms = chunk_ms(&v, deadline);
        if (ms == -2) {
            errno = EAGAIN;
            return -1;
        }
        struct timespec t = ns_ts((int64_t)ms * 1000000);
        int r = real_sigtimedwait(set, info, &t);
        if (r >= 0 || errno != EAGAIN)
            return r;
        vt_view(&v);
    }
}
