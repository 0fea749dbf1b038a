"""AI Platform (`ml.v1`) training jobs, decided. Pure, every module here and below (no I/O;
import-linter's ``pure`` contract names this folder): a submission as every face fills it
(`submission`, with the options' table `options`), the job model (`model`, read by Google's own
schemas in `schema`), machine types and accelerators (`machines`, `defaults`), the plan of a
submission (`plan`), hyperparameter specs (`hptuning`), listings and tables (`listing`, `tables`),
package URIs and delivery (`package_uri`, `package_delivery`), and `backend`, the one interface of
the runtimes. Per runtime: `kube` (a plan as Kubeflow Training Operator jobs and Katib
Experiments, and their status read back) and `local` (what each local process gets).
Who applies them: `server_ext.runtimes`; who calls them: `server_ext.service.jobs`.
"""
