"""The notebook server's REST + SSE face of the jobs service (`ml/v1/projects/{project}/jobs…`)."""
