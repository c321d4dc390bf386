-- Runs once, when the postgres container initialises an empty data volume.
-- The same databases scripts/infra.sh creates on a machine's own PostgreSQL.
CREATE DATABASE orders;
CREATE DATABASE fulfillment;
CREATE DATABASE notifier;
CREATE DATABASE orders_test;
CREATE DATABASE fulfillment_test;
CREATE DATABASE notifier_test;
CREATE DATABASE webhook_receiver;
CREATE DATABASE webhook_receiver_test;
