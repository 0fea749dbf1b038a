"""`kubectl ai-platform`: gcloud's `ai-platform jobs …` and `local train` commands for this platform."""
