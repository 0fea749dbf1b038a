"""Developer tools of the project (not tests): scripts run by hand or by a test."""
