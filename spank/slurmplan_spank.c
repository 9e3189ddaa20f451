/*
 * slurmplan SPANK plugin (Slurm 22.05).
 *
 * Local/allocator context (sbatch, salloc, srun): registers the plan-hint options (--plan-model,
 * --plan-gpus=MIN:MAX, ...). Slurm forwards each given option to slurmctld in the job's SPANK environment as
 * _SLURM_SPANK_OPTION_slurmplan_plan_<option>=<value>; site/job_submit.lua validates them with the hint
 * grammar (slurmplan/formats.py) and writes the canonical hints into the admin comment. The plugin itself
 * does not validate: one grammar, in one place per language, tested to agree.
 *
 * Remote context (slurmstepd, once per step in slurm_spank_user_init): exports the plan the daemon assigned as
 * SLURMPLAN_DP, _TP, _PP, _MICRO_BATCH, _GRAD_ACCUM, _CHECKPOINTING, _ZERO_STAGE, _OFFLOAD, _VIRTUAL_STAGES,
 * _GPU_TYPE and _GPUS into the tasks' environment. Slurm 22.05 gives a SPANK plugin no item for the admin
 * comment, so the plan is found, in this order:
 *   1. <plan_dir>/<job_id>.env, lines NAME=value (only SLURMPLAN_* names are taken), if the daemon wrote
 *      one with slurmplan.control.hook.write_plan_file (needs plan_dir on a file system the compute nodes see; a file writable by
 *      group or others is ignored);
 *   2. the decision part of the job's admin comment, read with `scontrol show job -o <id>` (works on any
 *      node that can reach slurmctld; the step's SLURM_CONF is inherited from slurmd); taken only when the
 *      AdminComment= field is unambiguous (a job name or comment may hold that text too).
 * No plan found is not an error: the job simply runs without the variables. Nothing here ever fails a job.
 *
 * plugstack.conf arguments: plan_dir=DIR (default /var/lib/slurmplan/plans), scontrol=PATH (default
 * scontrol found on PATH), disable_remote (skip step 1 and 2).
 */
#include <ctype.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(slurmplan, 1);

#define PLAN_TEXT_MAX 8192
#define PLAN_OUTPUT_MAX (1 << 20)

static char plan_dir[1024] = "/var/lib/slurmplan/plans";
static char scontrol_path[1024] = "scontrol";

int _admin_comment_field(const char *text, char *out, size_t size);
static int remote_disabled = 0;

static int _accept_option(int val, const char *optarg, int remote)
{
	/* Validation happens in job_submit.lua with the shared grammar; accepting here keeps one rule set. */
	(void) val;
	(void) optarg;
	(void) remote;
	return 0;
}

static struct spank_option plan_options[] = {
	{"plan-model", "NAME",
	 "slurmplan: model name, used to predict throughput and memory (e.g. llama2-7b).", 1, 0, _accept_option},
	{"plan-gpus", "N|MIN:MAX",
	 "slurmplan: GPUs the job can use: a fixed N, or an elastic range MIN:MAX the scheduler may resize within.",
	 1, 0, _accept_option},
	{"plan-gpu-types", "TYPE[,TYPE...]",
	 "slurmplan: GPU types the job may run on, in order of preference (e.g. a100,h100). Without it a managed "
	 "job's --gres=gpu:TYPE:N is only a preference: the scheduler may run it on another type.",
	 1, 0, _accept_option},
	{"plan-class", "guaranteed|best-effort",
	 "slurmplan: job class; guaranteed jobs keep at least their requested performance.", 1, 0, _accept_option},
	{"plan-workers", "N",
	 "slurmplan: logical workers (maxP) of an elastic data-parallel job; fixed for its life.", 1, 0,
	 _accept_option},
	{"plan-batch", "N", "slurmplan: global batch size in samples.", 1, 0, _accept_option},
	{"plan-seq", "N", "slurmplan: sequence length in tokens.", 1, 0, _accept_option},
	{"plan-stack", "megatron|deepspeed|ddp|fsdp",
	 "slurmplan: the training framework the job runs; throughput is predicted for it.", 1, 0, _accept_option},
	{"plan-steps", "N", "slurmplan: training steps the job will run (for finish-time policies).", 1, 0,
	 _accept_option},
	{"plan-deadline", "YYYY-MM-DDTHH:MM", "slurmplan: UTC time by which the job should finish.", 1, 0,
	 _accept_option},
	{"plan-managed", "yes|no",
	 "slurmplan: no = record the hints but let Slurm schedule the job itself (it is not held).", 1, 0,
	 _accept_option},
	SPANK_OPTIONS_TABLE_END
};

static void _parse_args(int ac, char **av)
{
	for (int i = 0; i < ac; i++) {
		if (!strncmp(av[i], "plan_dir=", 9))
			snprintf(plan_dir, sizeof(plan_dir), "%s", av[i] + 9);
		else if (!strncmp(av[i], "scontrol=", 9))
			snprintf(scontrol_path, sizeof(scontrol_path), "%s", av[i] + 9);
		else if (!strcmp(av[i], "disable_remote"))
			remote_disabled = 1;
		else
			slurm_error("slurmplan: unknown plugstack.conf argument '%s' (allowed: plan_dir=DIR, "
				    "scontrol=PATH, disable_remote)", av[i]);
	}
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	_parse_args(ac, av);
	for (struct spank_option *opt = plan_options; opt->name; opt++) {
		if (spank_option_register(sp, opt) != ESPANK_SUCCESS)
			slurm_error("slurmplan: could not register --%s", opt->name);
	}
	return 0;
}

/* ------------------------------------------------------------------------------------------ plan values */

struct plan {
	long dp, tp, pp, micro_batch, grad_accum, zero_stage, virtual_stages, gpus;
	int checkpointing, offload;
	char gpu_type[64];
};

static void _plan_defaults(struct plan *p)
{
	memset(p, 0, sizeof(*p));
	p->dp = p->tp = p->pp = p->micro_batch = p->grad_accum = p->virtual_stages = 1;
}

/* "a100x8" -> type a100, 8 GPUs. */
static int _parse_cell(const char *tok, struct plan *p)
{
	const char *x = strrchr(tok, 'x');
	char *end = NULL;
	size_t len;

	if (!x || x == tok || !isdigit((unsigned char) x[1]))
		return -1;
	len = (size_t) (x - tok);
	if (len >= sizeof(p->gpu_type))
		return -1;
	for (size_t i = 0; i < len; i++)
		if (!islower((unsigned char) tok[i]) && !isdigit((unsigned char) tok[i]) && tok[i] != '_' &&
		    tok[i] != '-')
			return -1;
	p->gpus = strtol(x + 1, &end, 10);
	if (*end)
		return -1;
	memcpy(p->gpu_type, tok, len);
	p->gpu_type[len] = '\0';
	return 0;
}

static int _parse_token(const char *tok, struct plan *p)
{
	static const struct {
		const char *prefix;
		size_t offset;
	} fields[] = {
		{"dp", offsetof(struct plan, dp)},
		{"tp", offsetof(struct plan, tp)},
		{"pp", offsetof(struct plan, pp)},
		{"mb", offsetof(struct plan, micro_batch)},
		{"ga", offsetof(struct plan, grad_accum)},
		{"v", offsetof(struct plan, virtual_stages)},
		{"z", offsetof(struct plan, zero_stage)},
	};
	if (!strcmp(tok, "gc")) {
		p->checkpointing = 1;
		return 0;
	}
	if (!strcmp(tok, "off")) {
		p->offload = 1;
		return 0;
	}
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		size_t n = strlen(fields[i].prefix);
		char *end = NULL;
		long value;

		if (strncmp(tok, fields[i].prefix, n) || !isdigit((unsigned char) tok[n]))
			continue;
		value = strtol(tok + n, &end, 10);
		if (*end)
			return -1;
		*(long *) ((char *) p + fields[i].offset) = value;
		return 0;
	}
	return -1;
}

/*
 * Find a decision "slurmplan: <type>x<gpus> dpN tpN ppN mbN gaN [vN] [gc] [zN] [off] | ..." anywhere in text
 * (the admin comment's part after " || "; hints never have a blank after "slurmplan:" and a cell token).
 */
static int _parse_decision(const char *text, struct plan *p)
{
	const char *marker = "slurmplan: ";
	for (const char *at = strstr(text, marker); at; at = strstr(at + 1, marker)) {
		char buf[1024];
		char *save = NULL, *tok;
		const char *start = at + strlen(marker);
		size_t len = strcspn(start, "|\n");

		if (len >= sizeof(buf))
			len = sizeof(buf) - 1;
		memcpy(buf, start, len);
		buf[len] = '\0';
		_plan_defaults(p);
		tok = strtok_r(buf, " \t", &save);
		if (!tok || _parse_cell(tok, p))
			continue;
		while ((tok = strtok_r(NULL, " \t", &save))) {
			if (_parse_token(tok, p))
				break; /* the end of the plan (e.g. the next scontrol field) */
		}
		return 0;
	}
	return -1;
}

/* ------------------------------------------------------------------------------------------ plan sources */

static int _export_file(spank_t sp, uint32_t job_id)
{
	char path[1200], line[1024];
	struct stat st, dir;
	int n = 0, fd;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%u.env", plan_dir, job_id);
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW)) < 0)
		return -1;
	if (!(f = fdopen(fd, "r"))) {
		close(fd);
		return -1;
	}
	/*
	 * The file sets the job's environment: only trust one that only the hook's user can change. The folder and
	 * the file must be owned by root or by the folder's owner (SlurmUser, who writes them from the controller
	 * hook), and neither may be writable by group or others: a file a user planted is never read.
	 */
	if (fstat(fileno(f), &st) || stat(plan_dir, &dir) || (st.st_mode & (S_IWGRP | S_IWOTH)) ||
	    (dir.st_mode & (S_IWGRP | S_IWOTH)) || (st.st_uid != 0 && st.st_uid != dir.st_uid) ||
	    !S_ISREG(st.st_mode)) {
		slurm_error("slurmplan: ignoring %s: not a file only root or the plan folder's owner can write", path);
		fclose(f);
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		char *eq = strchr(line, '=');
		line[strcspn(line, "\r\n")] = '\0';
		if (!eq || strncmp(line, "SLURMPLAN_", 10))
			continue;
		*eq = '\0';
		if (spank_setenv(sp, line, eq + 1, 1) == ESPANK_SUCCESS)
			n++;
	}
	fclose(f);
	slurm_debug("slurmplan: exported %d plan variables from %s", n, path);
	return n > 0 ? 0 : -1;
}

/*
 * The job's admin comment, from `scontrol show job -o <id>`. The job name, work directory and command come before
 * AdminComment= and the user's Comment= after it, and each may hold any text, "AdminComment=" too. So the field
 * must occur exactly once (otherwise a user string holds the key and the plan is not taken from there: logged),
 * and its value ends where " Comment=" begins. (`squeue --json --jobs=` would quote user strings, but Slurm 22.05
 * prints every job whatever the filter.) The output is read whole up to PLAN_OUTPUT_MAX; longer is logged.
 */
static int _read_admin_comment(uint32_t job_id, char *out, size_t size)
{
	char cmd[1200];
	size_t used = 0, got, cap = 16384;
	char *text = malloc(cap), *more;
	FILE *pipe;
	int rc;

	if (!text)
		return -1;
	snprintf(cmd, sizeof(cmd), "%s show job -o %u 2>/dev/null", scontrol_path, job_id);
	if (!(pipe = popen(cmd, "r"))) {
		free(text);
		return -1;
	}
	while ((got = fread(text + used, 1, cap - 1 - used, pipe)) > 0) {
		used += got;
		if (used + 1 == cap) {
			if (cap >= PLAN_OUTPUT_MAX || !(more = realloc(text, cap * 2)))
				break;
			text = more;
			cap *= 2;
		}
	}
	text[used] = '\0';
	rc = pclose(pipe);
	if (used + 1 == cap) {
		slurm_error("slurmplan: scontrol output for job %u is over %d bytes: no plan from its admin comment",
			    job_id, PLAN_OUTPUT_MAX);
		rc = -1;
	}
	if (rc == 0)
		rc = _admin_comment_field(text, out, size);
	if (rc == -2)
		slurm_error("slurmplan: job %u: \"AdminComment=\" occurs in its name, directory or comment too: no plan "
			    "taken from the admin comment", job_id);
	free(text);
	return rc ? -1 : 0;
}

/* The value of the one AdminComment= field of `scontrol show job -o` text: 0, -1 absent, -2 ambiguous. */
int _admin_comment_field(const char *text, char *out, size_t size)
{
	const char *key = "AdminComment=", *at = strstr(text, key), *end;
	size_t len;

	if (!at || !size)
		return -1;
	if (strstr(at + 1, key))
		return -2;
	at += strlen(key);
	end = strstr(at, " Comment=");
	len = end ? (size_t) (end - at) : strcspn(at, "\n");
	if (len >= size)
		len = size - 1;
	memcpy(out, at, len);
	out[len] = '\0';
	return 0;
}

static void _setenv_long(spank_t sp, const char *name, long value)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%ld", value);
	spank_setenv(sp, name, buf, 1);
}

static int _export_admin_comment(spank_t sp, uint32_t job_id)
{
	static char text[PLAN_TEXT_MAX];
	const char *comment;
	struct plan p;

	if (_read_admin_comment(job_id, text, sizeof(text)))
		return -1;
	comment = strstr(text, "||"); /* the decision part; hints never hold "slurmplan: " and a cell */
	if (_parse_decision(comment ? comment : text, &p))
		return -1;
	_setenv_long(sp, "SLURMPLAN_DP", p.dp);
	_setenv_long(sp, "SLURMPLAN_TP", p.tp);
	_setenv_long(sp, "SLURMPLAN_PP", p.pp);
	_setenv_long(sp, "SLURMPLAN_MICRO_BATCH", p.micro_batch);
	_setenv_long(sp, "SLURMPLAN_GRAD_ACCUM", p.grad_accum);
	_setenv_long(sp, "SLURMPLAN_CHECKPOINTING", p.checkpointing);
	_setenv_long(sp, "SLURMPLAN_ZERO_STAGE", p.zero_stage);
	_setenv_long(sp, "SLURMPLAN_OFFLOAD", p.offload);
	_setenv_long(sp, "SLURMPLAN_VIRTUAL_STAGES", p.virtual_stages);
	_setenv_long(sp, "SLURMPLAN_GPUS", p.gpus);
	spank_setenv(sp, "SLURMPLAN_GPU_TYPE", p.gpu_type, 1);
	slurm_debug("slurmplan: job %u plan from admin comment: %s x%ld dp%ld tp%ld pp%ld", job_id, p.gpu_type,
		    p.gpus, p.dp, p.tp, p.pp);
	return 0;
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	uint32_t job_id = 0;

	(void) ac;
	(void) av;
	if (!spank_remote(sp) || remote_disabled)
		return 0;
	if (spank_get_item(sp, S_JOB_ID, &job_id) != ESPANK_SUCCESS)
		return 0;
	if (!_export_file(sp, job_id)) {
		spank_setenv(sp, "SLURMPLAN_PLAN_SOURCE", "file", 1);
	} else if (!_export_admin_comment(sp, job_id)) {
		spank_setenv(sp, "SLURMPLAN_PLAN_SOURCE", "admin-comment", 1);
	} else {
		slurm_debug("slurmplan: no plan for job %u; tasks run without SLURMPLAN_* variables", job_id);
	}
	return 0; /* never fail a job for want of a plan */
}
