/* A bare release of N one-byte writes on loopback: the floor under a burst's spread.
 *
 * Opens N TCP connections to a listener on 127.0.0.1, starts a receiver thread that
 * reads every server socket through epoll (as a service's event loop would, woken by
 * each segment), then writes one byte to every client socket and prints how long the
 * writes took from the first to the last (the release spread: on loopback the segment
 * is on the wire, and received, when its send returns). Modes:
 *   send   one loop of send() at SCHED_FIFO (what stampede's release loop does)
 *   lanes  one such loop per core, started together by a barrier
 *   uring  one io_uring submission of N send SQEs, one io_uring_enter for all
 *   mux    what a multiplexed transport would write: the N releases over N/K
 *          connections, K 16-byte pieces (an HTTP/2 DATA frame's header and last byte,
 *          rounded up) in one send per connection, one loop at SCHED_FIFO
 * Usage: bare_release N MODE [REPEATS] [K]; prints one line per repeat.
 * Build: cc -O2 -pthread -o bare_release bare_release.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <linux/io_uring.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int n;
static int *cli, *srv;
static atomic_long received;
static double recv_last;
static int rt_ok = 1;
/* Bytes per send: 1, or 16 * K in mux mode. */
static int piece = 1;
static char payload[16 * 1024];

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static void die(const char *what) {
    perror(what);
    exit(1);
}

static void fifo(void) {
    struct sched_param p = {.sched_priority = sched_get_priority_min(SCHED_FIFO)};
    if (pthread_setschedparam(pthread_self(), SCHED_FIFO, &p) != 0) rt_ok = 0;
}

static void unfifo(void) {
    struct sched_param p = {.sched_priority = 0};
    pthread_setschedparam(pthread_self(), SCHED_OTHER, &p);
}

static void *receiver(void *arg) {
    int ep = *(int *)arg;
    struct epoll_event ev[256];
    static char buf[64 * 1024];
    for (;;) {
        int k = epoll_wait(ep, ev, 256, -1);
        for (int i = 0; i < k; i++) {
            if (ev[i].data.fd < 0) return NULL; /* the stop pipe */
            ssize_t r = read(ev[i].data.fd, buf, sizeof buf);
            if (r > 0) {
                recv_last = now_ms();
                atomic_fetch_add(&received, r);
            }
        }
    }
}

struct lane {
    int from, to;
    pthread_barrier_t *start;
    double t0, t1;
};

static void *lane_run(void *arg) {
    struct lane *l = arg;
    fifo();
    pthread_barrier_wait(l->start);
    l->t0 = now_ms();
    for (int i = l->from; i < l->to; i++)
        if (send(cli[i], payload, piece, MSG_NOSIGNAL) != piece) die("send");
    l->t1 = now_ms();
    unfifo();
    return NULL;
}

/* A minimal io_uring: set up, fill N send SQEs, one enter, reap. */
static double release_uring(double *t0) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    unsigned entries = 1;
    while (entries < (unsigned)n) entries <<= 1;
    int fd = syscall(__NR_io_uring_setup, entries, &p);
    if (fd < 0) die("io_uring_setup");
    size_t sq_sz = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_sz = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    char *sq = mmap(0, sq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQ_RING);
    char *cq = mmap(0, cq_sz, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_CQ_RING);
    struct io_uring_sqe *sqes = mmap(0, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
                                     MAP_SHARED | MAP_POPULATE, fd, IORING_OFF_SQES);
    if (sq == MAP_FAILED || cq == MAP_FAILED || sqes == MAP_FAILED) die("mmap");
    unsigned *sq_tail = (unsigned *)(sq + p.sq_off.tail);
    unsigned *sq_array = (unsigned *)(sq + p.sq_off.array);
    unsigned *cq_head = (unsigned *)(cq + p.cq_off.head);
    unsigned *cq_tail = (unsigned *)(cq + p.cq_off.tail);
    struct io_uring_cqe *cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    static const char byte = '}';
    for (int i = 0; i < n; i++) {
        struct io_uring_sqe *s = &sqes[i];
        memset(s, 0, sizeof *s);
        s->opcode = IORING_OP_SEND;
        s->fd = cli[i];
        s->addr = (uintptr_t)&byte;
        s->len = 1;
        s->msg_flags = MSG_NOSIGNAL;
        s->user_data = i;
        sq_array[i] = i;
    }
    fifo();
    *t0 = now_ms();
    atomic_store_explicit((_Atomic unsigned *)sq_tail, n, memory_order_release);
    int done = syscall(__NR_io_uring_enter, fd, n, n, IORING_ENTER_GETEVENTS, NULL, 0);
    double t1 = now_ms();
    unfifo();
    if (done != n) die("io_uring_enter");
    unsigned head = *cq_head, tail = atomic_load_explicit((_Atomic unsigned *)cq_tail, memory_order_acquire);
    for (; head != tail; head++)
        if (cqes[head & (p.cq_entries - 1)].res != 1) { fprintf(stderr, "send sqe failed\n"); exit(1); }
    close(fd);
    return t1;
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: bare_release N send|lanes|uring [REPEATS]\n"); return 2; }
    n = atoi(argv[1]);
    const char *mode = argv[2];
    int repeats = argc > 3 ? atoi(argv[3]) : 1;
    int total = n; /* releases, whatever the connections */
    memset(payload, '}', sizeof payload);
    if (!strcmp(mode, "mux")) {
        int k = argc > 4 ? atoi(argv[4]) : 100;
        if (k < 1 || k > 1024) { fprintf(stderr, "K in 1..1024\n"); return 2; }
        piece = 16 * k;
        n = (n + k - 1) / k;
    }
    struct rlimit rl = {2 * n + 64, 2 * n + 64};
    setrlimit(RLIMIT_NOFILE, &rl);
    int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    for (int rep = 0; rep < repeats; rep++) {
        int ls = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t al = sizeof a;
        if (bind(ls, (void *)&a, sizeof a) || listen(ls, 4096) || getsockname(ls, (void *)&a, &al)) die("listen");
        cli = calloc(n, sizeof *cli);
        srv = calloc(n, sizeof *srv);
        int ep = epoll_create1(0);
        int one = 1;
        for (int i = 0; i < n; i++) {
            cli[i] = socket(AF_INET, SOCK_STREAM, 0);
            if (connect(cli[i], (void *)&a, sizeof a)) die("connect");
            setsockopt(cli[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            srv[i] = accept(ls, NULL, NULL);
            if (srv[i] < 0) die("accept");
            struct epoll_event ev = {.events = EPOLLIN, .data.fd = srv[i]};
            epoll_ctl(ep, EPOLL_CTL_ADD, srv[i], &ev);
        }
        int stop[2];
        if (pipe(stop)) die("pipe");
        struct epoll_event sev = {.events = EPOLLIN, .data.fd = -1};
        epoll_ctl(ep, EPOLL_CTL_ADD, stop[0], &sev);
        atomic_store(&received, 0);
        pthread_t rx;
        pthread_create(&rx, NULL, receiver, &ep);
        usleep(50000); /* the receiver is in epoll_wait */
        double t0 = 0, t1 = 0;
        int lanes = 1;
        if (!strcmp(mode, "send") || !strcmp(mode, "mux")) {
            pthread_barrier_t b;
            pthread_barrier_init(&b, NULL, 1);
            struct lane l = {0, n, &b, 0, 0};
            lane_run(&l);
            t0 = l.t0;
            t1 = l.t1;
        } else if (!strcmp(mode, "lanes")) {
            lanes = cores < 8 ? cores : 8;
            pthread_barrier_t b;
            pthread_barrier_init(&b, NULL, lanes);
            struct lane l[8];
            pthread_t th[8];
            int share = (n + lanes - 1) / lanes;
            for (int k = 0; k < lanes; k++) {
                l[k] = (struct lane){k * share, (k + 1) * share < n ? (k + 1) * share : n, &b, 0, 0};
                if (k) pthread_create(&th[k], NULL, lane_run, &l[k]);
            }
            lane_run(&l[0]);
            for (int k = 1; k < lanes; k++) pthread_join(th[k], NULL);
            t0 = l[0].t0;
            t1 = l[0].t1;
            for (int k = 1; k < lanes; k++) {
                if (l[k].t0 < t0) t0 = l[k].t0;
                if (l[k].t1 > t1) t1 = l[k].t1;
            }
        } else if (!strcmp(mode, "uring")) {
            t1 = release_uring(&t0);
        } else {
            fprintf(stderr, "unknown mode %s\n", mode);
            return 2;
        }
        double deadline = now_ms() + 10000;
        while (atomic_load(&received) < (long)n * piece && now_ms() < deadline) usleep(1000);
        if (write(stop[1], "x", 1) != 1) die("stop");
        pthread_join(rx, NULL);
        printf("bare mode=%s releases=%d sends=%d lanes=%d realtime=%s spread_ms=%.2f us_per_send=%.2f "
               "last_read_ms=%.2f received_bytes=%ld\n",
               mode, total, n, lanes, rt_ok ? "yes" : "no", t1 - t0, (t1 - t0) * 1e3 / n, recv_last - t0,
               atomic_load(&received));
        for (int i = 0; i < n; i++) { close(cli[i]); close(srv[i]); }
        close(ls);
        close(ep);
        close(stop[0]);
        close(stop[1]);
        free(cli);
        free(srv);
    }
    return 0;
}
