/*
 * orrun.c - launch an OpenReg Cluster job, on this host or on several.
 *
 * Usage: orrun -n RANKS [-d DEVICES] [--ranks-per-node K] [--bind MODE]
 *              [--profile NAME] [--topo TOPOLOGY] [--placement HOW] [--time MODE]
 *              [--trace FILE] [--hosts LIST | --hostfile FILE]
 *              [--launcher-exec PROGRAM] [--emulate-links] [--dry-run] [-h|--help]
 *              -- PROGRAM [ARGS...]
 *
 * Sets the runtime's variables for every rank (OPENREG_DEVICES,
 * OPENREG_RANKS_PER_NODE, OPENREG_BIND, OPENREG_DEVICE_PROFILE, OPENREG_TOPO,
 * OPENREG_PLACEMENT, OPENREG_TIME, OPENREG_TRACE for the options given,
 * MPIR_CVAR_DEFAULT_THREAD_LEVEL unless set), what torch.distributed's env://
 * needs (MASTER_ADDR, MASTER_PORT: a free port, WORLD_SIZE) and execs
 * 'mpiexec [HOSTS] -n RANKS ORRUN --exec-rank -- PROGRAM ARGS...' (--hosts,
 * --hostfile and --launcher-exec pass through to Hydra as -hosts, -f and
 * '-launcher ssh -launcher-exec'): mpiexec can only
 * give every rank the same environment, so each rank starts as orrun again,
 * adds its own RANK, LOCAL_RANK and LOCAL_WORLD_SIZE from the launcher's
 * variables (PMI_RANK, ...) and execs the program. Values are checked with the
 * runtime's own table and parser, so orrun accepts exactly what the runtime
 * accepts.
 * --emulate-links shapes each host's network interface with tc (netem, else
 * orlinkemu, else tbf), from the topology's NICs, for the job's length (then orrun waits for mpiexec instead
 * of becoming it).
 * --dry-run prints the plan instead: virtual nodes, and each device's cores
 * and NUMA node as the runtime's placement will choose them. docs/orrun.md
 * has sample output.
 *
 * Exit status: mpiexec's; 0 after --dry-run or --help; 1 if the dry run
 * cannot plan (the environment holds a value the runtime refuses, or hwloc
 * fails) or no TCP port is free; 2 on a bad command line; 126 if mpiexec
 * cannot be run; 127 if it is not found.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "topo.h"

/* As many ranks as the runtime accepts on one host (MPI_LOCALNRANKS). */
static const or_param ranks_param = {"-n", OR_PARAM_INT, NULL, "an integer from 1 to 4096",
                                     "number of ranks", 1, 4096, NULL, 0};

static const char *const thread_level_var = "MPIR_CVAR_DEFAULT_THREAD_LEVEL";
static const char *const thread_level = "MPI_THREAD_MULTIPLE";

/* An entry of the runtime's table; orrun and the runtime must agree on it. */
static const or_param *param(const char *name)
{
    size_t n;
    const or_param *p = or_config_params(&n);
    for (size_t i = 0; i < n; i++)
        if (strcmp(p[i].name, name) == 0)
            return &p[i];
    fprintf(stderr, "orrun: the runtime has no variable %s\n", name);
    exit(1);
}

/* ---- command line --------------------------------------------------------- */

/* A variable orrun sets from an option. */
typedef struct {
    const char *option; /* "-d", "--bind", ... */
    const char *var;    /* OPENREG_... */
    const char *text;   /* the option's value as given, NULL if not given */
    long long value;    /* parsed */
    char exported[32];  /* what the ranks get: canonical spelling */
    const char *file;   /* a file value (--placement FILE) made absolute, else NULL */
} setting;

enum { S_DEVICES, S_RANKS_PER_NODE, S_BIND, S_PROFILE, S_TOPO, S_PLACEMENT, S_TIME, NSETTINGS };

typedef struct {
    const char *ranks_text;
    long long ranks;
    setting s[NSETTINGS];
    bool dry_run;
    const char *trace; /* --trace FILE: OPENREG_TRACE */
    const char *hosts;    /* --hosts LIST: mpiexec -hosts */
    char *hostfile;       /* --hostfile FILE, absolute: mpiexec -f */
    char *launcher_exec;  /* --launcher-exec PROGRAM (or ORRUN_LAUNCHER_EXEC), resolved */
    char first_host[256]; /* the first host of --hosts or --hostfile: MASTER_ADDR */
    bool emulate_links;   /* --emulate-links: shape the hosts' links with tc */
    char **program; /* PROGRAM ARGS..., NULL-terminated (argv's tail) */
} options;

static void usage(FILE *f)
{
    const or_param *dev = param("OPENREG_DEVICES"), *bind = param("OPENREG_BIND"),
                   *prof = param("OPENREG_DEVICE_PROFILE");
    fprintf(f,
            "usage: orrun -n RANKS [-d DEVICES] [--ranks-per-node K] [--bind MODE]\n"
            "             [--profile NAME] [--topo TOPOLOGY] [--placement HOW] [--time MODE]\n"
            "             [--trace FILE] [--hosts LIST | --hostfile FILE]\n"
            "             [--launcher-exec PROGRAM] [--emulate-links] [--dry-run] [-h|--help]\n"
            "             -- PROGRAM [ARGS...]\n"
            "\n"
            "Runs PROGRAM as an OpenReg Cluster job of RANKS MPI ranks, on this host or on\n"
            "the hosts given: sets the runtime's variables below for every rank, then execs\n"
            "'mpiexec -n RANKS PROGRAM ARGS...'.\n"
            "\n"
            "  -n RANKS            number of ranks:\n"
            "                      %s\n"
            "  -d DEVICES          devices per rank (OPENREG_DEVICES):\n"
            "                      %s\n"
            "  --ranks-per-node K  ranks per virtual node (OPENREG_RANKS_PER_NODE):\n"
            "                      an integer from 1 to RANKS; rank r is on node r/K\n"
            "                      (default: the ranks of this host are one node)\n"
            "  --bind MODE         binding of device threads and memory (OPENREG_BIND):\n"
            "                      %s\n"
            "  --profile NAME      device model (OPENREG_DEVICE_PROFILE):\n"
            "                      %s\n"
            "  --topo TOPOLOGY     cluster topology (OPENREG_TOPO): a preset (dgx-a100x2,\n"
            "                      ...), a synthetic string or an XML file; it decides\n"
            "                      the virtual nodes, so not with --ranks-per-node\n"
            "  --placement HOW     ranks on the topology's nodes (OPENREG_PLACEMENT):\n"
            "                      packed (fill each node), spread (round robin) or\n"
            "                      a placement file: one 'RANK: DEVICE...' line per rank\n"
            "                      (./packed for a file named packed)\n"
            "  --time MODE         clock of events and traces (OPENREG_TIME): wall or\n"
            "                      virtual (modelled, deterministic; docs/virtual-time.md)\n"
            "  --trace FILE        Chrome trace of every rank (OPENREG_TRACE): each rank\n"
            "                      writes FILE.rankN.json (FILE.json alone with 1 rank);\n"
"                      'ortrace-merge FILE.json' joins them\n"
            "  --hosts LIST        run on these hosts (mpiexec -hosts): host[:n],...;\n"
            "                      each host is a virtual node unless K or a topology\n"
            "                      says otherwise\n"
            "  --hostfile FILE     run on the hosts of FILE (mpiexec -f): 'host[:n]' lines\n"
            "  --launcher-exec PROGRAM\n"
            "                      start each host's part with PROGRAM instead of ssh\n"
            "                      (mpiexec -launcher ssh -launcher-exec PROGRAM): it is\n"
            "                      called as ssh is, 'PROGRAM [-x] HOST COMMAND...'\n"
            "                      (default: ORRUN_LAUNCHER_EXEC, else mpiexec's own)\n"
            "  --emulate-links     make the hosts' network what the topology declares, for\n"
            "                      wall-clock runs: before the launch, tc on each host\n"
            "                      (through the launcher, as root there) gives the\n"
            "                      interface of UCX_NET_DEVICES (default eth0) the rate\n"
            "                      and latency of the NICs of topology node k (host k of\n"
            "                      the list): netem, else orlinkemu (beside orrun), else\n"
            "                      tbf (rate only); removed when the job ends\n"
            "  --dry-run           print the plan (virtual nodes, each device's cores and\n"
            "                      NUMA node) and the mpiexec command; launch nothing\n"
            "  -h, --help          print this help\n"
            "\n"
            "A variable whose option is not given keeps the environment's value (or the\n"
            "runtime's default). %s is set to %s\n"
            "unless already set, so programs calling plain MPI_Init work with the runtime.\n"
            "For torch.distributed's env:// (dist.init_process_group(\"occl\")), every\n"
            "rank gets MASTER_ADDR (127.0.0.1, or the first host of --hosts/--hostfile)\n"
            "and MASTER_PORT (a free port here) unless set,\n"
            "WORLD_SIZE=RANKS, and its own RANK, LOCAL_RANK and LOCAL_WORLD_SIZE.\n"
            "ORRUN_MPIEXEC names the mpiexec to run (default: MPICH's, " OR_MPIEXEC ").\n"
            "\n"
            "Exit status: mpiexec's; 2 on a bad command line, 127 if mpiexec is not found,\n"
            "126 if it cannot be run.\n",
            ranks_param.accepted, dev->accepted, bind->accepted, prof->accepted,
            thread_level_var, thread_level);
}

__attribute__((format(printf, 1, 2), noreturn)) static void bad_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "orrun: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n\n");
    va_end(ap);
    usage(stderr);
    exit(2);
}

/* The value of the option at argv[*i]: "--opt=value", or the next word. */
static const char *option_value(int argc, char **argv, int *i, const char *name)
{
    const char *arg = argv[*i];
    size_t len = strlen(name);
    if (strncmp(arg, name, len) == 0 && arg[len] == '=')
        return arg + len + 1;
    if (*i + 1 >= argc || strcmp(argv[*i + 1], "--") == 0)
        bad_usage("%s needs a value", name);
    return argv[++*i];
}

/* Long options also come as "--opt=value". */
static bool is_option(const char *arg, const char *name)
{
    size_t len = strlen(name);
    return strncmp(arg, name, len) == 0 &&
           (arg[len] == '\0' || (name[1] == '-' && arg[len] == '='));
}

/* What the ranks get: the canonical spelling, a topology as given, or a
 * file's absolute name (a rank that changes directory still finds it). */
static const char *exported(const setting *s)
{
    if (s->file)
        return s->file;
    return param(s->var)->kind == OR_PARAM_TOPOLOGY ? s->text : s->exported;
}

static void parse_setting(setting *s, const or_param *p, const char *accepted)
{
    if (p->kind == OR_PARAM_TOPOLOGY) {
        or_topo *t;
        or_topo_error err;
        char msg[1024];
        if (or_topo_load(s->text, s->option, &t, &err) != OR_TOPO_OK) {
            or_topo_error_format(&err, msg, sizeof msg);
            bad_usage("%s", msg);
        }
        or_topo_free(t);
        s->value = 1;
        return;
    }
    if (or_param_parse(p, s->text, &s->value) && p->kind == OR_PARAM_CHOICE_OR_FILE)
        bad_usage("%s '%s' is not valid: expected %s; as a file: %s", s->option, s->text,
                  accepted, *s->text ? or_config_file_problem(s->text) : "empty name");
    if (or_param_parse(p, s->text, &s->value))
        bad_usage("%s '%s' is not valid: expected %s", s->option, s->text, accepted);
    if (p->kind == OR_PARAM_CHOICE_OR_FILE && !p->choices[s->value]) {
        /* One such option (--placement): its name can live here. */
        static char absolute[PATH_MAX];
        if (!realpath(s->text, absolute))
            bad_usage("%s '%s': %s", s->option, s->text, strerror(errno));
        s->file = absolute;
        return;
    }
    if (p->kind == OR_PARAM_CHOICE || p->kind == OR_PARAM_CHOICE_OR_FILE)
        snprintf(s->exported, sizeof s->exported, "%s", p->choices[s->value]);
    else
        snprintf(s->exported, sizeof s->exported, "%lld", s->value);
}

static char *find_program(const char *name);

/* A host of --hosts or of a host file: a name, then ':n' processes or not. */
static bool valid_host(const char *h, size_t len, char *name, size_t size)
{
    size_t n = strcspn(h, ":");
    if (n > len)
        n = len;
    if (n == 0 || n >= size)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_", h[i]))
            return false;
    if (n < len) { /* ":n", n from 1 */
        const char *c = h + n + 1;
        size_t digits = len - n - 1;
        if (digits == 0 || digits > 6 || *c == '0')
            return false;
        for (size_t i = 0; i < digits; i++)
            if (c[i] < '0' || c[i] > '9')
                return false;
    }
    memcpy(name, h, n);
    name[n] = '\0';
    return true;
}

/* --hosts, --hostfile, --launcher-exec: checked here, so that a typo stops
 * orrun rather than Hydra halfway through a launch. */
static void parse_hosts(options *o)
{
    if (o->hosts && o->hostfile)
        bad_usage("--hosts and --hostfile: give one");
    if (o->hosts) {
        const char *h = o->hosts;
        char name[sizeof o->first_host];
        if (!*h)
            bad_usage("--hosts needs a host list: host[:n],...");
        for (int k = 0;; k++) {
            size_t len = strcspn(h, ",");
            if (!valid_host(h, len, name, sizeof name))
                bad_usage("--hosts '%s' is not valid: '%.*s' is not host[:n] (a host name of "
                          "letters, digits, '.', '-', '_', then optionally ':' and a number "
                          "of processes from 1)", o->hosts, (int)len, h);
            if (k == 0)
                snprintf(o->first_host, sizeof o->first_host, "%s", name);
            if (!h[len])
                break;
            h += len + 1;
        }
    }
    if (o->hostfile) {
        const char *given = o->hostfile;
        static char absolute[PATH_MAX];
        FILE *f = *given && realpath(given, absolute) ? fopen(absolute, "r") : NULL;
        if (!f)
            bad_usage("--hostfile '%s': %s", given, *given ? strerror(errno) : "empty name");
        char line[1024], name[sizeof o->first_host];
        int lineno = 0;
        while (fgets(line, sizeof line, f)) {
            lineno++;
            char *w = line + strspn(line, " \t");
            size_t len = strcspn(w, " \t\r\n#");
            if (len == 0)
                continue; /* blank or a comment */
            if (!valid_host(w, len, name, sizeof name)) {
                fclose(f);
                bad_usage("--hostfile %s:%d: '%.*s' is not host[:n]", absolute, lineno, (int)len,
                          w);
            }
            /* Hydra takes 'key=value' words after the host, nothing else. */
            for (char *t = w + len; *(t += strspn(t, " \t")) && *t != '#' && *t != '\r' &&
                                    *t != '\n';
                 t += strcspn(t, " \t\r\n#")) {
                size_t tlen = strcspn(t, " \t\r\n#");
                if (!memchr(t, '=', tlen) || *t == '=') {
                    fclose(f);
                    bad_usage("--hostfile %s:%d: '%.*s' after the host is not key=value", absolute,
                              lineno, (int)tlen, t);
                }
            }
            if (!o->first_host[0])
                snprintf(o->first_host, sizeof o->first_host, "%s", name);
        }
        fclose(f);
        if (!o->first_host[0])
            bad_usage("--hostfile %s names no host", absolute);
        o->hostfile = absolute;
    }
    const char *from = "--launcher-exec";
    if (!o->launcher_exec && getenv("ORRUN_LAUNCHER_EXEC") && *getenv("ORRUN_LAUNCHER_EXEC")) {
        o->launcher_exec = getenv("ORRUN_LAUNCHER_EXEC");
        from = "ORRUN_LAUNCHER_EXEC";
    }
    if (o->launcher_exec) {
        /* mpiexec runs it from wherever it is: an absolute path. */
        char *path = *o->launcher_exec ? find_program(o->launcher_exec) : NULL;
        char *absolute = path ? realpath(path, NULL) : NULL;
        free(path);
        if (!absolute)
            bad_usage("%s '%s': no such executable", from, o->launcher_exec);
        o->launcher_exec = absolute;
    }
}

static void check_emulate_links(const options *o);

static void parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->s[S_DEVICES] = (setting){"-d", "OPENREG_DEVICES", NULL, 0, "", NULL};
    o->s[S_RANKS_PER_NODE] =
        (setting){"--ranks-per-node", "OPENREG_RANKS_PER_NODE", NULL, 0, "", NULL};
    o->s[S_BIND] = (setting){"--bind", "OPENREG_BIND", NULL, 0, "", NULL};
    o->s[S_PROFILE] = (setting){"--profile", "OPENREG_DEVICE_PROFILE", NULL, 0, "", NULL};
    o->s[S_TOPO] = (setting){"--topo", "OPENREG_TOPO", NULL, 0, "", NULL};
    o->s[S_PLACEMENT] = (setting){"--placement", "OPENREG_PLACEMENT", NULL, 0, "", NULL};
    o->s[S_TIME] = (setting){"--time", "OPENREG_TIME", NULL, 0, "", NULL};

    int i = 1;
    bool dashdash = false;
    for (; i < argc; i++) {
        const char *arg = argv[i];
        setting *s = NULL;
        if (strcmp(arg, "--") == 0) {
            dashdash = true;
            i++;
            break;
        } else if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            usage(stdout);
            exit(fflush(stdout) == 0 ? 0 : 1);
        } else if (strcmp(arg, "--dry-run") == 0) {
            o->dry_run = true;
        } else if (strcmp(arg, "--emulate-links") == 0) {
            o->emulate_links = true;
        } else if (strcmp(arg, "-n") == 0) {
            o->ranks_text = option_value(argc, argv, &i, "-n");
        } else if (strcmp(arg, "-d") == 0) {
            s = &o->s[S_DEVICES];
        } else if (is_option(arg, "--ranks-per-node")) {
            s = &o->s[S_RANKS_PER_NODE];
        } else if (is_option(arg, "--bind")) {
            s = &o->s[S_BIND];
        } else if (is_option(arg, "--profile")) {
            s = &o->s[S_PROFILE];
        } else if (is_option(arg, "--topo")) {
            s = &o->s[S_TOPO];
        } else if (is_option(arg, "--placement")) {
            s = &o->s[S_PLACEMENT];
        } else if (is_option(arg, "--time")) {
            s = &o->s[S_TIME];
        } else if (is_option(arg, "--hosts")) {
            o->hosts = option_value(argc, argv, &i, "--hosts");
        } else if (is_option(arg, "--hostfile")) {
            o->hostfile = (char *)option_value(argc, argv, &i, "--hostfile");
        } else if (is_option(arg, "--launcher-exec")) {
            o->launcher_exec = (char *)option_value(argc, argv, &i, "--launcher-exec");
        } else if (is_option(arg, "--trace")) {
            o->trace = option_value(argc, argv, &i, "--trace");
            if (!*o->trace)
                bad_usage("--trace needs a file name");
        } else if (arg[0] == '-') {
            bad_usage("unknown option '%s'", arg);
        } else {
            bad_usage("no '--' before '%s': the program and its arguments go after '--'", arg);
        }
        if (s)
            s->text = option_value(argc, argv, &i, s->option);
    }
    if (!dashdash)
        bad_usage("no '--' before the program");
    if (i == argc)
        bad_usage("no program after '--'");
    o->program = argv + i;

    if (!o->ranks_text)
        bad_usage("-n RANKS is required");
    if (or_param_parse(&ranks_param, o->ranks_text, &o->ranks))
        bad_usage("-n '%s' is not valid: expected %s", o->ranks_text, ranks_param.accepted);
    for (int k = 0; k < NSETTINGS; k++) {
        setting *s = &o->s[k];
        if (!s->text)
            continue;
        const or_param *p = param(s->var);
        if (k == S_RANKS_PER_NODE) {
            /* The runtime takes 0 (one node per host) and any K; a launcher that
             * names K means nodes of K of its own ranks. */
            char accepted[64];
            snprintf(accepted, sizeof accepted, "an integer from 1 to RANKS (%lld)", o->ranks);
            parse_setting(s, p, accepted);
            if (s->value < 1 || s->value > o->ranks)
                bad_usage("%s '%s' is not valid: expected %s", s->option, s->text, accepted);
        } else {
            parse_setting(s, p, p->accepted);
        }
    }
    if (o->s[S_TOPO].text && o->s[S_RANKS_PER_NODE].text)
        bad_usage("--ranks-per-node and --topo: the topology decides the virtual nodes");
    if (o->s[S_PLACEMENT].text && !o->s[S_TOPO].text && !getenv("OPENREG_TOPO"))
        bad_usage("--placement places ranks on a topology: give --topo (or OPENREG_TOPO)");
    parse_hosts(o);
    if (o->emulate_links)
        check_emulate_links(o);
    /* The table and the profile list are separate: both must know the name. */
    if (o->s[S_PROFILE].text && !or_profile_find(o->s[S_PROFILE].exported))
        bad_usage("--profile '%s' is not valid: expected %s", o->s[S_PROFILE].text,
                  param("OPENREG_DEVICE_PROFILE")->accepted);
}

/* ---- mpiexec -------------------------------------------------------------- */

static bool executable_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* Resolve name as execvp would: a name with a slash as is, else along PATH.
 * Returns a malloc'd path, or NULL. */
static char *find_program(const char *name)
{
    if (strchr(name, '/')) {
        if (!executable_file(name))
            return NULL;
        char *copy = strdup(name);
        if (!copy) {
            fprintf(stderr, "orrun: out of memory\n");
            exit(1);
        }
        return copy;
    }
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *dir = path;; dir++) {
        size_t len = strcspn(dir, ":");
        /* An empty PATH entry is the current directory. */
        size_t need = (len ? len : 1) + 1 + strlen(name) + 1;
        char *full = malloc(need);
        if (!full) {
            fprintf(stderr, "orrun: out of memory\n");
            exit(1);
        }
        snprintf(full, need, "%.*s/%s", len ? (int)len : 1, len ? dir : ".", name);
        if (executable_file(full))
            return full;
        free(full);
        dir += len;
        if (!*dir)
            return NULL;
    }
}

/* MPICH's mpiexec, by the path configure found (plain 'mpiexec' on PATH
 * may be Open MPI's, whose ranks the runtime cannot join). */
#ifndef OR_MPIEXEC
#define OR_MPIEXEC "mpiexec"
#endif

static const char *mpiexec_name(void)
{
    const char *name = getenv("ORRUN_MPIEXEC");
    return name && *name ? name : OR_MPIEXEC;
}

/* A word as a shell would need it, so the printed command can be pasted. */
static void print_word(const char *w)
{
    bool plain = *w != '\0';
    for (const char *c = w; *c && plain; c++)
        plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-",
                       *c) != NULL;
    if (plain) {
        fputs(w, stdout);
        return;
    }
    putchar('\'');
    for (const char *c = w; *c; c++)
        if (*c == '\'')
            fputs("'\\''", stdout);
        else
            putchar(*c);
    putchar('\'');
}

/* ---- the topology ----------------------------------------------------------- */

/* The job on its topology (--topo, else OPENREG_TOPO), as the runtime will
 * place it. topo is NULL when there is none. */
typedef struct {
    or_topo *topo;
    char source[96];
    long long placement; /* an or_topo_placement, or OR_PLACEMENT_FILE */
    const char *file;    /* the placement file, if one */
    int *device;  /* topology device of each rank's device */
    int *node_of; /* virtual node of each rank */
    int nodes_used;
} job_topology;

static void job_topology_free(job_topology *jt)
{
    or_topo_free(jt->topo);
    free(jt->device);
    free(jt->node_of);
    memset(jt, 0, sizeof *jt);
}

static int plan_topology(const options *o, long long nd, job_topology *jt)
{
    memset(jt, 0, sizeof *jt);
    const setting *ts = &o->s[S_TOPO], *ps = &o->s[S_PLACEMENT];
    const char *spec = ts->text ? ts->text : getenv("OPENREG_TOPO");
    if (!spec)
        return 0;
    snprintf(jt->source, sizeof jt->source, "%s", ts->text ? "--topo" : "OPENREG_TOPO");
    long long how = 0;
    const char *ptext = ps->text ? ps->text : getenv("OPENREG_PLACEMENT");
    if (ptext && or_param_parse(param("OPENREG_PLACEMENT"), ptext, &how)) {
        fprintf(stderr, "orrun: OPENREG_PLACEMENT='%s' is not valid: expected %s; as a file: %s\n",
                ptext, param("OPENREG_PLACEMENT")->accepted, or_config_file_problem(ptext));
        return -1;
    }
    jt->placement = how;
    if (how == OR_PLACEMENT_FILE)
        jt->file = ps->file ? ps->file : ptext;
    or_topo_error err;
    char msg[1024];
    if (or_topo_load(spec, jt->source, &jt->topo, &err) != OR_TOPO_OK) {
        or_topo_error_format(&err, msg, sizeof msg);
        fprintf(stderr, "orrun: %s\n", msg);
        return -1;
    }
    long long ranks = o->ranks;
    jt->device = malloc(sizeof *jt->device * (size_t)(ranks * nd));
    jt->node_of = malloc(sizeof *jt->node_of * (size_t)ranks);
    int *number = calloc((size_t)or_topo_node_count(jt->topo), sizeof *number);
    if (!jt->device || !jt->node_of || !number) {
        fprintf(stderr, "orrun: out of memory\n");
        free(number);
        job_topology_free(jt);
        return -1;
    }
    if (jt->file) {
        /* The whole file against this job, as every rank will check it. */
        if (or_topo_place_file(jt->topo, jt->file, (int)ranks, (int)nd, jt->device, &err)) {
            or_topo_error_format(&err, msg, sizeof msg);
            fprintf(stderr, "orrun: %s: the placement file does not fit the job: %s\n",
                    ps->text ? "--placement" : "OPENREG_PLACEMENT", msg);
            free(number);
            job_topology_free(jt);
            return -1;
        }
    } else if (or_topo_place(jt->topo, (int)ranks, (int)nd, (or_topo_placement)jt->placement,
                             jt->device, &err)) {
        fprintf(stderr, "orrun: the job does not fit: %s\n", err.message);
        free(number);
        job_topology_free(jt);
        return -1;
    }
    /* As the runtime numbers them: the nodes used, in topology order. */
    for (long long r = 0; r < ranks; r++)
        number[or_topo_device_node(jt->topo, jt->device[r * nd])] = 1;
    for (int n = 0; n < or_topo_node_count(jt->topo); n++)
        number[n] = number[n] ? jt->nodes_used++ : -1;
    for (long long r = 0; r < ranks; r++)
        jt->node_of[r] = number[or_topo_device_node(jt->topo, jt->device[r * nd])];
    free(number);
    return 0;
}

/* ---- torch.distributed's environment --------------------------------------- */

/* env:// needs the same MASTER_ADDR and MASTER_PORT in every rank (rank 0
 * listens there) and each rank's own RANK. mpiexec gives every rank the same
 * environment, so orrun passes the common part and starts each rank as
 * 'orrun --exec-rank -- PROGRAM ARGS', which adds the rank's own variables
 * from the launcher's and execs the program. */
static const char *const local_addr = "127.0.0.1";

/* Where rank 0 runs: this host, or the first host of --hosts/--hostfile
 * (Hydra puts the first ranks there). */
static const char *master_addr(const options *o)
{
    return o->first_host[0] ? o->first_host : local_addr;
}

/* The job on other hosts: --hosts or --hostfile. */
static bool on_hosts(const options *o) { return o->hosts || o->hostfile; }

/* mpiexec's options for the hosts and the launcher, before -n: at most 6
 * words into args; returns how many. */
static int host_args(const options *o, char **args)
{
    int n = 0;
    if (o->launcher_exec) {
        /* Called as ssh is: 'PROGRAM -x HOST COMMAND...'. */
        args[n++] = "-launcher";
        args[n++] = "ssh";
        args[n++] = "-launcher-exec";
        args[n++] = o->launcher_exec;
    }
    if (o->hosts) {
        args[n++] = "-hosts";
        args[n++] = (char *)o->hosts;
    } else if (o->hostfile) {
        args[n++] = "-f";
        args[n++] = o->hostfile;
    }
    return n;
}
static const char *const exec_rank_option = "--exec-rank";

/* ---- emulated links ----------------------------------------------------------- */

/* With --emulate-links, host k of the list gets the network of the
 * topology's node k: the rate of that node's NICs together, and the latency
 * from its NIC to another node's (its NIC link to the switch and one more
 * such link beyond: NIC to NIC, the 'inter' latency of a synthetic string),
 * on the egress of the interface UCX uses there. A packet crosses one
 * shaped egress on its way, so each direction gets the NIC's rate and the
 * whole NIC-to-NIC latency. The shaping is netem's where the kernel has it;
 * else orlinkemu's (delay and rate, no netem needed: installed beside
 * orrun), else tbf's (rate only). */
typedef struct {
    char host[256];
    int node;        /* topology node */
    double rate;     /* bytes/s */
    double delay_ns; /* added one-way latency */
    char how[16];    /* what shapes it: netem, orlinkemu, tbf; empty: nothing */
} link_plan;

/* The interface to shape: UCX_NET_DEVICES's first device (as "eth0" or
 * "mlx5_0:1", the port left out), else eth0. NULL if the name cannot be an
 * interface's (it is put in a shell command on each host). */
static const char *link_device(void)
{
    static char dev[64];
    const char *u = getenv("UCX_NET_DEVICES");
    size_t n = u ? strcspn(u, ",:") : 0;
    if (!u || n == 0 || strcmp(u, "all") == 0)
        return "eth0";
    if (n >= 16) /* IFNAMSIZ */
        return NULL;
    memcpy(dev, u, n);
    dev[n] = '\0';
    for (size_t i = 0; i < n; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-@", dev[i]))
            return NULL;
    return dev;
}

static bool virtual_time_mode(const options *o)
{
    const char *t = o->s[S_TIME].text ? o->s[S_TIME].exported : getenv("OPENREG_TIME");
    return t && strcasecmp(t, "virtual") == 0;
}

static void check_emulate_links(const options *o)
{
    if (!on_hosts(o))
        bad_usage("--emulate-links shapes the network between hosts: give --hosts or --hostfile");
    if (!o->s[S_TOPO].text && !getenv("OPENREG_TOPO"))
        bad_usage("--emulate-links takes the network from the topology: give --topo (or "
                  "OPENREG_TOPO)");
    if (virtual_time_mode(o))
        bad_usage("--emulate-links is for wall-clock runs: with --time virtual the model times "
                  "the network itself");
    if (!link_device())
        bad_usage("--emulate-links: UCX_NET_DEVICES='%s' does not start with an interface name",
                  getenv("UCX_NET_DEVICES"));
}

/* The hosts of --hosts or --hostfile (already checked), each once, in order. */
static int list_hosts(const options *o, link_plan *plan, int max)
{
    int n = 0;
    char name[256];
    const char *h = o->hosts;
    FILE *f = o->hostfile ? fopen(o->hostfile, "r") : NULL;
    char line[1024];
    for (;;) {
        size_t len;
        const char *w;
        if (h) {
            w = h;
            len = strcspn(h, ",");
            h = h[len] ? h + len + 1 : NULL;
        } else if (f && fgets(line, sizeof line, f)) {
            w = line + strspn(line, " \t");
            len = strcspn(w, " \t\r\n#");
            if (len == 0)
                continue;
        } else {
            break;
        }
        if (!valid_host(w, len, name, sizeof name))
            continue;
        bool seen = false;
        for (int k = 0; k < n; k++)
            seen |= strcmp(plan[k].host, name) == 0;
        if (!seen && n < max)
            snprintf(plan[n++].host, sizeof plan[0].host, "%s", name);
        if (!h && !f)
            break;
    }
    if (f)
        fclose(f);
    return n;
}

/* The shaping of every host; NULL (after a message) when the topology has
 * no network for a host's node. */
static link_plan *plan_links(const options *o, int *count)
{
    const char *spec = o->s[S_TOPO].text ? o->s[S_TOPO].text : getenv("OPENREG_TOPO");
    or_topo *t;
    or_topo_error err;
    char msg[1024];
    if (or_topo_load(spec, o->s[S_TOPO].text ? "--topo" : "OPENREG_TOPO", &t, &err) != OR_TOPO_OK) {
        or_topo_error_format(&err, msg, sizeof msg);
        fprintf(stderr, "orrun: %s\n", msg);
        return NULL;
    }
    enum { MAX_HOSTS = 4096 };
    link_plan *plan = calloc(MAX_HOSTS, sizeof *plan);
    if (!plan) {
        fprintf(stderr, "orrun: out of memory\n");
        or_topo_free(t);
        return NULL;
    }
    int n = list_hosts(o, plan, MAX_HOSTS);
    for (int k = 0; k < n; k++) {
        link_plan *p = &plan[k];
        p->node = k % or_topo_node_count(t);
        double lat = 0;
        for (int l = 0; l < or_topo_link_count(t); l++) {
            or_topo_link_info li = or_topo_link(t, l);
            if (li.kind != OR_TOPO_LINK_NET)
                continue;
            or_topo_vertex_info a = or_topo_vertex(t, li.a), b = or_topo_vertex(t, li.b);
            if ((a.kind == OR_TOPO_NIC && a.node == p->node) ||
                (b.kind == OR_TOPO_NIC && b.node == p->node)) {
                p->rate += li.bandwidth;
                lat = li.latency_ns > lat ? li.latency_ns : lat;
            }
        }
        p->delay_ns = 2 * lat;
        if (p->rate <= 0) {
            fprintf(stderr,
                    "orrun: --emulate-links: node %s of topology %s has no network link (a NIC "
                    "to a switch): nothing to give host %s\n",
                    or_topo_node_name(t, p->node), or_topo_name(t), p->host);
            free(plan);
            or_topo_free(t);
            return NULL;
        }
    }
    or_topo_free(t);
    *count = n;
    return plan;
}

/* orlinkemu beside this program (a build tree's orrun runs from .libs),
 * as the hosts have it at the same path as orrun itself; "orlinkemu" (the
 * PATH's) if this one's path cannot go into a shell command as it is. */
static const char *linkemu_path(void)
{
    static char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
    if (n <= 0)
        return "orlinkemu";
    path[n] = '\0';
    char *slash = strrchr(path, '/');
    *slash = '\0';
    if (slash - path >= 6 && strcmp(slash - 6, "/.libs") == 0)
        slash[-6] = '\0';
    strcat(path, "/orlinkemu");
    for (const char *c = path; *c; c++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.,+-/", *c))
            return "orlinkemu";
    return path;
}

/* The shell command that shapes dev on a host, printing what it used:
 * netem (rate and delay); else, for a delay, orlinkemu (rate and delay);
 * else tbf (rate only). */
static void shape_command(const link_plan *p, const char *dev, char *buf, size_t size)
{
    /* tbf's bucket: 10 ms of the rate, and at least a few 64 KiB segments
     * (veths hand over GSO packets that large; a bigger packet is dropped). */
    long long burst = (long long)(p->rate / 100);
    if (burst > 64LL << 20)
        burst = 64LL << 20; /* far beyond what a machine's TCP stack sends in 10 ms */
    if (burst < 256 * 1024)
        burst = 256 * 1024;
    char tbf[256];
    snprintf(tbf, sizeof tbf,
             "tc qdisc replace dev %s root tbf rate %.0fbps burst %lld latency 200ms", dev,
             p->rate, burst);
    if (p->delay_ns >= 1000)
        snprintf(buf, size,
                 "if tc qdisc replace dev %s root netem delay %lldus rate %.0fbps limit 100000 "
                 "2>/dev/null; then echo netem; elif %s --delay %lldus --rate %.0f %s; then echo "
                 "orlinkemu; else %s && echo tbf; fi",
                 dev, (long long)(p->delay_ns / 1000 + 0.5), p->rate, linkemu_path(),
                 (long long)(p->delay_ns / 1000 + 0.5), p->rate, dev, tbf);
    else
        snprintf(buf, size, "%s && echo tbf", tbf);
}

/* The launcher that reaches the hosts: --launcher-exec's, else ssh (as Hydra). */
static char *links_launcher(const options *o)
{
    return o->launcher_exec ? strdup(o->launcher_exec) : find_program("ssh");
}

/* 'LAUNCHER -x HOST COMMAND' (as Hydra calls ssh); its output into out.
 * Returns the exit status, or -1 if it could not run. */
static int run_on_host(const char *launcher, const char *host, const char *command, char *out,
                       size_t size)
{
    int fds[2];
    out[0] = '\0';
    if (pipe(fds) != 0)
        return -1;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        dup2(fds[1], STDERR_FILENO);
        close(fds[0]);
        close(fds[1]);
        execl(launcher, launcher, "-x", host, command, (char *)NULL);
        fprintf(stderr, "cannot run %s: %s\n", launcher, strerror(errno));
        _exit(127);
    }
    close(fds[1]);
    size_t used = 0;
    for (;;) {
        char sink[256];
        char *at = used + 1 < size ? out + used : sink;
        size_t room = used + 1 < size ? size - 1 - used : sizeof sink;
        ssize_t got = read(fds[0], at, room);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        if (at != sink)
            used += (size_t)got;
    }
    out[used] = '\0';
    while (used > 0 && (out[used - 1] == '\n' || out[used - 1] == '\r'))
        out[--used] = '\0';
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void unshape_links(const char *launcher, link_plan *plan, int n, const char *dev)
{
    char cmd[4200], out[1024];
    for (int k = 0; k < n; k++) {
        if (!plan[k].how[0])
            continue;
        if (strcmp(plan[k].how, "orlinkemu") == 0)
            snprintf(cmd, sizeof cmd, "%s --stop %s >/dev/null", linkemu_path(), dev);
        else
            snprintf(cmd, sizeof cmd, "tc qdisc del dev %s root", dev);
        if (run_on_host(launcher, plan[k].host, cmd, out, sizeof out) != 0)
            fprintf(stderr, "orrun: warning: --emulate-links: cannot remove the shaping of %s "
                            "on %s ('%s'): %s\n", dev, plan[k].host, cmd, out);
        plan[k].how[0] = '\0';
    }
}

/* Shape every host; on a failure, undo the hosts already shaped. */
static int shape_links(const char *launcher, link_plan *plan, int n, const char *dev)
{
    char cmd[8192], out[1024];
    for (int k = 0; k < n; k++) {
        link_plan *p = &plan[k];
        shape_command(p, dev, cmd, sizeof cmd);
        int rc = run_on_host(launcher, p->host, cmd, out, sizeof out);
        const char *how = strrchr(out, '\n') ? strrchr(out, '\n') + 1 : out;
        if (rc != 0 || (strcmp(how, "netem") != 0 && strcmp(how, "orlinkemu") != 0 &&
                        strcmp(how, "tbf") != 0)) {
            fprintf(stderr,
                    "orrun: --emulate-links: cannot shape %s on %s with tc (it needs iproute2 "
                    "and root there): %s exited %d: %s\n",
                    dev, p->host, launcher, rc, out[0] ? out : "no output");
            unshape_links(launcher, plan, k, dev);
            return -1;
        }
        snprintf(p->how, sizeof p->how, "%.*s", (int)sizeof p->how - 1, how);
        fprintf(stderr, "orrun: emulating links: %s %s: %.6g MB/s, %.6g us (%s)\n", p->host, dev,
                p->rate / 1e6, p->delay_ns / 1e3, p->how);
        if (strcmp(how, "tbf") == 0 && p->delay_ns >= 1000)
            fprintf(stderr,
                    "orrun: warning: --emulate-links: %s's kernel has no netem (sch_netem) and "
                    "%s did not run there: %s gets the rate only, not the %.6g us of latency%s%.*s\n",
                    p->host, linkemu_path(), dev, p->delay_ns / 1e3, how > out ? ": " : "",
                    (int)(how > out ? how - out - 1 : 0), out);
    }
    return 0;
}

/* mpiexec as a child, the hosts shaped meanwhile; a signal to orrun goes on
 * to mpiexec, and the shaping is removed however the job ends. */
static volatile pid_t job_pid;
static volatile sig_atomic_t stopped_by; /* a signal before mpiexec started */
static void forward_signal(int sig)
{
    if (job_pid > 0)
        kill(job_pid, sig);
    else
        stopped_by = sig;
}

static int run_shaped(const options *o, const char *path, char **args)
{
    int n = 0;
    link_plan *plan = plan_links(o, &n);
    if (!plan)
        return 1;
    char *launcher = links_launcher(o);
    if (!launcher) {
        fprintf(stderr,
                "orrun: --emulate-links: no ssh to reach the hosts (give --launcher-exec)\n");
        free(plan);
        return 1;
    }
    const char *dev = link_device();
    /* From here on a signal must not leave the hosts shaped. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    if (shape_links(launcher, plan, n, dev)) {
        free(launcher);
        free(plan);
        return stopped_by ? 128 + stopped_by : 1;
    }
    if (stopped_by) {
        unshape_links(launcher, plan, n, dev);
        free(launcher);
        free(plan);
        return 128 + stopped_by;
    }
    fflush(NULL);
    int rc;
    pid_t pid = fork();
    if (pid == 0) {
        execv(path, args);
        int err = errno;
        fprintf(stderr, "orrun: cannot run %s: %s\n", path, strerror(err));
        _exit(err == ENOENT ? 127 : 126);
    }
    job_pid = pid;
    if (stopped_by && pid > 0) /* came between the check and the fork */
        kill(pid, stopped_by);
    if (pid < 0) {
        fprintf(stderr, "orrun: cannot start %s: %s\n", path, strerror(errno));
        rc = 1;
    } else {
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    unshape_links(launcher, plan, n, dev);
    free(launcher);
    free(plan);
    return rc;
}

static int print_links_plan(const options *o)
{
    int n = 0;
    link_plan *plan = plan_links(o, &n);
    if (!plan)
        return -1;
    char *launcher = links_launcher(o);
    const char *dev = link_device();
    printf("links:     --emulate-links: %s on each host, through %s; host k is topology node k\n",
           dev, launcher ? launcher : "ssh (not found)");
    char cmd[8192];
    for (int k = 0; k < n; k++) {
        shape_command(&plan[k], dev, cmd, sizeof cmd);
        printf("  %s (node %d): %.6g MB/s, %.6g us: %s\n", plan[k].host, plan[k].node,
               plan[k].rate / 1e6, plan[k].delay_ns / 1e3, cmd);
    }
    free(launcher);
    free(plan);
    return 0;
}

/* A TCP port nobody listens on now (for rank 0's c10d store); 0 if none. */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY); /* the store listens on every address */
    socklen_t len = sizeof a;
    int port = 0;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    close(fd);
    return port;
}

/* The first of the launcher variables set: Hydra (MPICH) first, then Open
 * MPI, PMIx and Slurm. NULL if none. */
static const char *launcher_value(const char *const *names, const char **which)
{
    for (; *names; names++) {
        const char *v = getenv(*names);
        if (v && *v) {
            *which = *names;
            return v;
        }
    }
    return NULL;
}

static bool is_count(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

/* 'orrun --exec-rank -- PROGRAM ARGS...', run by mpiexec in every rank. */
static int exec_rank(int argc, char **argv)
{
    static const char *const rank_vars[] = {"PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK",
                                            "SLURM_PROCID", NULL};
    static const char *const local_vars[] = {"MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK",
                                             "SLURM_LOCALID", NULL};
    static const char *const local_size_vars[] = {"MPI_LOCALNRANKS",
                                                  "OMPI_COMM_WORLD_LOCAL_SIZE", NULL};
    if (argc < 4 || strcmp(argv[2], "--") != 0) {
        fprintf(stderr, "orrun: %s is how orrun starts each rank: 'orrun %s -- PROGRAM "
                        "[ARGS...]' under mpiexec\n", exec_rank_option, exec_rank_option);
        return 2;
    }
    const char *var = NULL, *local_var = NULL, *size_var = NULL;
    const char *rank = launcher_value(rank_vars, &var);
    if (!rank || !is_count(rank)) {
        fprintf(stderr, "orrun: %s: the launcher gave no rank (%s%s%s; expected PMI_RANK): "
                        "start jobs with 'orrun -n RANKS -- PROGRAM'\n", exec_rank_option,
                var ? var : "no PMI_RANK", rank ? "=" : "", rank ? rank : "");
        return 1;
    }
    const char *local = launcher_value(local_vars, &local_var);
    const char *local_size = launcher_value(local_size_vars, &size_var);
    /* orrun launches on one host: without the launcher's local view, the
     * job's ranks are this host's. */
    if (!local || !is_count(local))
        local = rank;
    if (!local_size || !is_count(local_size))
        local_size = getenv("WORLD_SIZE");
    if (setenv("RANK", rank, 1) != 0 || setenv("LOCAL_RANK", local, 1) != 0 ||
        (local_size && setenv("LOCAL_WORLD_SIZE", local_size, 1) != 0)) {
        fprintf(stderr, "orrun: cannot set RANK: %s\n", strerror(errno));
        return 1;
    }
    execvp(argv[3], argv + 3);
    int err = errno;
    fprintf(stderr, "orrun: rank %s cannot run %s: %s\n", rank, argv[3], strerror(err));
    return err == ENOENT ? 127 : 126;
}

/* This program's path, for mpiexec to start each rank with: the running
 * binary itself (libtool's build-tree wrapper exports the library path). */
static char *self_path(const char *argv0)
{
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) {
        buf[n] = '\0';
        char *copy = strdup(buf);
        if (copy)
            return copy;
    }
    return find_program(argv0);
}

/* ---- the dry run ------------------------------------------------------------ */

static const char *plural(long long n) { return n == 1 ? "" : "s"; }

/* An effective value: the option's, else the environment's, else the
 * runtime's default; source says which, for the plan. */
typedef struct {
    long long value;
    char source[96];
} effective;

static int effective_value(const setting *s, effective *e)
{
    const or_param *p = param(s->var);
    if (s->text) {
        e->value = s->value;
        snprintf(e->source, sizeof e->source, "%s %s", s->option, s->exported);
        return 0;
    }
    const char *env = getenv(s->var);
    const char *text = env ? env : p->default_value;
    if (or_param_parse(p, text, &e->value))
        return -1; /* reported by check_environment */
    if (env)
        snprintf(e->source, sizeof e->source, "%s=%s from the environment", s->var, env);
    else
        snprintf(e->source, sizeof e->source, "default");
    return 0;
}

/* The runtime refuses to start on any bad value in its table; a plan made
 * despite one would describe a job that cannot run. */
static int check_environment(const options *o)
{
    size_t n;
    const or_param *p = or_config_params(&n);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        bool overridden = false;
        for (int k = 0; k < NSETTINGS; k++)
            overridden |= o->s[k].text && strcmp(o->s[k].var, p[i].name) == 0;
        overridden |= o->trace && strcmp(p[i].name, "OPENREG_TRACE") == 0;
        const char *env = getenv(p[i].name);
        long long v;
        if (overridden || !env || or_param_parse(&p[i], env, &v) == 0)
            continue;
        fprintf(stderr,
                "orrun: %s='%s' in the environment is not valid: expected %s; the runtime "
                "would not start\n",
                p[i].name, env, p[i].accepted);
        rc = -1;
    }
    return rc;
}

static const char *bind_meaning(long long mode)
{
    switch ((or_bind_mode)mode) {
    case OR_BIND_CORE:
        return "each compute thread on one core of its device, memory on its NUMA node";
    case OR_BIND_NUMA: return "compute threads and memory on the device's NUMA node";
    case OR_BIND_NONE: return "threads and memory left where the OS puts them";
    }
    return "unknown";
}

static int count_inside(hwloc_topology_t t, hwloc_const_cpuset_t set, hwloc_obj_type_t type)
{
    int n = hwloc_get_nbobjs_inside_cpuset_by_type(t, set, type);
    return n > 0 ? n : 0;
}

static int dry_run(const options *o, const char *mpiexec, const char *mpiexec_path,
                   const char *self)
{
    if (check_environment(o))
        return 1;
    effective devices, rpn, bind, profile;
    if (effective_value(&o->s[S_DEVICES], &devices) ||
        effective_value(&o->s[S_RANKS_PER_NODE], &rpn) ||
        effective_value(&o->s[S_BIND], &bind) || effective_value(&o->s[S_PROFILE], &profile))
        return 1;
    job_topology jt;
    if (plan_topology(o, devices.value, &jt))
        return 1;
    const or_device_profile *prof = or_profiles()[profile.value];

    hwloc_topology_t topo = or_placement_topology();
    if (!topo) {
        fprintf(stderr, "orrun: cannot load the host topology (hwloc)\n");
        return 1;
    }
    hwloc_const_cpuset_t allowed = hwloc_topology_get_allowed_cpuset(topo);
    bool this_host = hwloc_topology_is_thissystem(topo);
    /* The ranks inherit this process's binding; the runtime then splits only
     * those cores, among each rank's own devices (or_placement_compute). */
    hwloc_bitmap_t mine = hwloc_bitmap_alloc();
    if (!mine) {
        fprintf(stderr, "orrun: out of memory\n");
        return 1;
    }
    bool bound = this_host && hwloc_get_cpubind(topo, mine, HWLOC_CPUBIND_PROCESS) == 0 &&
                 !hwloc_bitmap_iszero(mine) && !hwloc_bitmap_isincluded(allowed, mine);

    long long ranks = o->ranks, nd = devices.value, k = rpn.value;
    long long nnodes = k > 0 ? (ranks + k - 1) / k : 1;
    printf("orrun: dry run, nothing is launched\n");
    if (o->hosts)
        printf("ranks:     %lld on hosts %s (--hosts)\n", ranks, o->hosts);
    else if (o->hostfile)
        printf("ranks:     %lld on the hosts of %s (--hostfile)\n", ranks, o->hostfile);
    else
        printf("ranks:     %lld on this host\n", ranks);
    if (o->launcher_exec)
        printf("launcher:  %s (--launcher-exec), called as ssh is\n", o->launcher_exec);
    if (o->emulate_links && print_links_plan(o))
        return 1;
    if (jt.topo) {
        printf("nodes:     %d virtual node%s: the nodes of topology %s (%s) that the job uses, ",
               jt.nodes_used, plural(jt.nodes_used), or_topo_name(jt.topo), jt.source);
        if (jt.file)
            printf("placement file %s\n", jt.file);
        else
            printf("%s placement\n", jt.placement == OR_TOPO_PLACE_SPREAD ? "spread" : "packed");
        printf("           (the topology has %d node%s, %d device%s)\n",
               or_topo_node_count(jt.topo), plural(or_topo_node_count(jt.topo)),
               or_topo_device_count(jt.topo), plural(or_topo_device_count(jt.topo)));
    } else if (k > 0) {
        printf("nodes:     %lld virtual node%s", nnodes, plural(nnodes));
        if (nnodes == 1)
            printf(" of %s%lld rank%s", ranks > 1 ? "all " : "", ranks, plural(ranks));
        else if (ranks % k == 0)
            printf(" of %lld rank%s", k, plural(k));
        else
            printf(" of %lld ranks, the last of %lld", k, ranks % k);
        if (nnodes == 1)
            printf(" (%s)\n", rpn.source);
        else if (k == 1)
            printf(" (%s): each rank is a node\n", rpn.source);
        else
            printf(" (%s): rank r is on node r/%lld\n", rpn.source, k);
    } else if (on_hosts(o)) {
        printf("nodes:     one per host (%s: the ranks of each host are one node)\n", rpn.source);
    } else {
        printf("nodes:     1 (%s: the ranks of this host are one node)\n", rpn.source);
    }
    printf("devices:   %lld per rank (%s), %lld in total\n", nd, devices.source, nd * ranks);
    printf("profile:   %s (%s): %s\n", prof->name, profile.source, prof->description);
    printf("bind:      %s (%s): %s\n", param("OPENREG_BIND")->choices[bind.value], bind.source,
           bind_meaning(bind.value));

    const char *synthetic = getenv("HWLOC_SYNTHETIC"), *xml = getenv("HWLOC_XMLFILE");
    int ncores = count_inside(topo, allowed, HWLOC_OBJ_CORE);
    const char *unit = "core";
    if (ncores == 0) { /* some virtual machines expose PUs only */
        ncores = count_inside(topo, allowed, HWLOC_OBJ_PU);
        unit = "cpu";
    }
    int nnuma = count_inside(topo, allowed, HWLOC_OBJ_NUMANODE);
    if (!this_host && synthetic)
        printf("topology:  HWLOC_SYNTHETIC=\"%s\"", synthetic);
    else if (!this_host && xml)
        printf("topology:  HWLOC_XMLFILE=%s", xml);
    else if (!this_host)
        printf("topology:  not this host's");
    else
        printf("topology:  this host");
    printf(", %d %s%s, %d NUMA node%s\n", ncores, unit, plural(ncores), nnuma, plural(nnuma));
    if (!this_host)
        printf("           (not this host: devices are placed on it, compute threads stay "
               "unbound)\n");

    char list[256];
    if (on_hosts(o)) {
        /* orrun sees this host only, and Hydra decides how many ranks each
         * host gets. */
        printf("placement: each host places the devices of its own ranks on its own cores (not "
               "planned here: orrun sees only this host)\n");
    } else if (bound) {
        hwloc_bitmap_list_snprintf(list, sizeof list, mine);
        printf("placement: this process is bound to cpus %s, which every rank inherits: each "
               "rank splits them among its own %lld device%s\n",
               list, nd, plural(nd));
    } else {
        printf("placement: the %lld rank%s share the %d %s%s: %lld device slot%s\n", ranks,
               plural(ranks), ncores, unit, plural(ncores), ranks * nd, plural(ranks * nd));
    }

    or_placement *places = calloc((size_t)nd, sizeof *places);
    if (!places) {
        fprintf(stderr, "orrun: out of memory\n");
        hwloc_bitmap_free(mine);
        return 1;
    }
    int rc = 0;
    for (long long r = 0; r < ranks && rc == 0 && !on_hosts(o); r++) {
        int planned = bound ? or_placement_plan(topo, mine, 0, 1, (int)nd, places)
                            : or_placement_plan(topo, allowed, (int)r, (int)ranks, (int)nd, places);
        if (planned) {
            fprintf(stderr, "orrun: the topology has no cores to place devices on\n");
            rc = 1;
            break;
        }
        printf("rank %lld (node %lld):\n", r,
               jt.topo ? (long long)jt.node_of[r] : k > 0 ? r / k : 0);
        for (long long d = 0; d < nd; d++) {
            const or_placement *p = &places[d];
            printf("  device %lld (global %lld", d, r * nd + d);
            if (jt.topo) {
                int td = jt.device[r * nd + d];
                printf(", topology %s", or_topo_vertex(jt.topo, or_topo_device_vertex(jt.topo, td)).id);
            }
            printf("): cpus %s, ", p->cpulist);
            if (p->numa_node >= 0)
                printf("NUMA node %d", p->numa_node);
            else
                printf("NUMA node unknown");
            if (bind.value == OR_BIND_NUMA) {
                hwloc_bitmap_list_snprintf(list, sizeof list, p->numa_cpuset);
                printf(", threads on cpus %s", list);
            }
            printf("\n");
            or_placement_release(&places[d]);
        }
    }
    free(places);
    hwloc_bitmap_free(mine);
    or_placement_fini();
    job_topology_free(&jt);
    if (rc)
        return rc;

    printf("environment of every rank, set by orrun:\n");
    for (int s = 0; s < NSETTINGS; s++)
        if (o->s[s].text)
            printf("  %s=%s\n", o->s[s].var, exported(&o->s[s]));
    if (o->trace) {
        printf("  OPENREG_TRACE=");
        print_word(o->trace);
        printf("\n");
    }
    const char *level = getenv(thread_level_var);
    if (level)
        printf("  %s=%s (already set, kept)\n", thread_level_var, level);
    else
        printf("  %s=%s\n", thread_level_var, thread_level);
    const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
    if (addr)
        printf("  MASTER_ADDR=%s (already set, kept)\n", addr);
    else
        printf("  MASTER_ADDR=%s\n", master_addr(o));
    if (port)
        printf("  MASTER_PORT=%s (already set, kept)\n", port);
    else
        printf("  MASTER_PORT=a free port, chosen at launch\n");
    printf("  WORLD_SIZE=%lld\n", ranks);
    printf("  RANK, LOCAL_RANK, LOCAL_WORLD_SIZE: each rank's own, set by orrun %s\n",
           exec_rank_option);
    printf("command:\n  ");
    print_word(mpiexec_path ? mpiexec_path : mpiexec);
    char *hargs[6];
    for (int a = 0, n = host_args(o, hargs); a < n; a++) {
        putchar(' ');
        print_word(hargs[a]);
    }
    printf(" -n %lld ", ranks);
    print_word(self ? self : "orrun");
    printf(" %s --", exec_rank_option);
    for (char **a = o->program; *a; a++) {
        putchar(' ');
        print_word(*a);
    }
    printf("\n");
    if (!mpiexec_path)
        printf("  (%s is not found: the launch would fail)\n", mpiexec);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "orrun: cannot write the output: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}

/* ---- main ------------------------------------------------------------------- */

/* Only a level below MULTIPLE is worth a word: the runtime refuses it. */
static void warn_thread_level(void)
{
    const char *level = getenv(thread_level_var);
    if (level && !strcasestr(level, "MULTIPLE"))
        fprintf(stderr,
                "orrun: warning: %s=%s is kept; a program calling plain MPI_Init will get "
                "orErrorInitialization from the runtime (it needs %s)\n",
                thread_level_var, level, thread_level);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], exec_rank_option) == 0)
        return exec_rank(argc, argv);
    options o;
    parse_args(argc, argv, &o);
    warn_thread_level();

    const char *mpiexec = mpiexec_name();
    char *path = find_program(mpiexec);
    char *self = self_path(argv[0]);
    if (o.dry_run) {
        int rc = dry_run(&o, mpiexec, path, self);
        free(path);
        free(self);
        free(o.launcher_exec); /* realpath's (parse_hosts) */
        return rc;
    }
    if (!self) {
        fprintf(stderr, "orrun: cannot find its own program to start the ranks with\n");
        free(path);
        return 1;
    }
    /* A job that does not fit its topology stops here, before any rank. */
    job_topology jt = {0};
    effective devices;
    if (effective_value(&o.s[S_DEVICES], &devices) == 0 &&
        plan_topology(&o, devices.value, &jt)) {
        free(path);
        free(self);
        return 1;
    }
    job_topology_free(&jt);
    if (!path) {
        if (getenv("ORRUN_MPIEXEC") && *getenv("ORRUN_MPIEXEC"))
            fprintf(stderr, "orrun: ORRUN_MPIEXEC=%s: no such executable\n", mpiexec);
        else
            fprintf(stderr, "orrun: %s not found (install MPICH, or set ORRUN_MPIEXEC to "
                            "its path)\n", mpiexec);
        free(self);
        return 127;
    }

    for (int k = 0; k < NSETTINGS; k++)
        if (o.s[k].text && setenv(o.s[k].var, exported(&o.s[k]), 1) != 0) {
            fprintf(stderr, "orrun: cannot set %s: %s\n", o.s[k].var, strerror(errno));
            return 1;
        }
    if (o.trace && setenv("OPENREG_TRACE", o.trace, 1) != 0) {
        fprintf(stderr, "orrun: cannot set OPENREG_TRACE: %s\n", strerror(errno));
        return 1;
    }
    if (setenv(thread_level_var, thread_level, 0) != 0) {
        fprintf(stderr, "orrun: cannot set %s: %s\n", thread_level_var, strerror(errno));
        return 1;
    }
    char port[16], world[24];
    snprintf(world, sizeof world, "%lld", o.ranks);
    if (!getenv("MASTER_PORT")) {
        int p = free_port();
        if (!p) {
            fprintf(stderr, "orrun: no free TCP port for MASTER_PORT: %s (set MASTER_PORT)\n",
                    strerror(errno));
            return 1;
        }
        snprintf(port, sizeof port, "%d", p);
        if (setenv("MASTER_PORT", port, 1) != 0) {
            fprintf(stderr, "orrun: cannot set MASTER_PORT: %s\n", strerror(errno));
            return 1;
        }
    }
    if (setenv("MASTER_ADDR", master_addr(&o), 0) != 0 || setenv("WORLD_SIZE", world, 1) != 0) {
        fprintf(stderr, "orrun: cannot set MASTER_ADDR: %s\n", strerror(errno));
        return 1;
    }

    /* mpiexec -n RANKS ORRUN --exec-rank -- PROGRAM ARGS...: the program's
     * words pass unchanged. */
    int nprog = 0;
    while (o.program[nprog])
        nprog++;
    char **args = calloc((size_t)nprog + 13, sizeof *args);
    char ranks[24];
    if (!args) {
        fprintf(stderr, "orrun: out of memory\n");
        return 1;
    }
    snprintf(ranks, sizeof ranks, "%lld", o.ranks);
    int a = 0;
    args[a++] = (char *)mpiexec;
    a += host_args(&o, args + a);
    args[a++] = "-n";
    args[a++] = ranks;
    args[a++] = self;
    args[a++] = (char *)exec_rank_option;
    args[a++] = "--";
    memcpy(args + a, o.program, (size_t)nprog * sizeof *args);
    args[nprog + a] = NULL;
    if (o.emulate_links) {
        int rc = run_shaped(&o, path, args);
        free(args);
        free(path);
        free(self);
        free(o.launcher_exec); /* realpath's (parse_hosts) */
        return rc;
    }
    fflush(NULL);
    execv(path, args);
    /* Only reached when the exec failed. */
    int err = errno;
    fprintf(stderr, "orrun: cannot run %s: %s\n", path, strerror(err));
    free(args);
    free(path);
    free(self);
    return err == ENOENT ? 127 : 126;
}
