-- The microVM tier: a tenant's isolation floor set by its operator
-- ('' leaves the floor its first-party mark gives; 'container',
-- 'kernel' or 'vm' raise it), and how a microVM's guest ran for each
-- execution ('kvm' or 'tcg'; '' for the other backends and for
-- executions recorded before).
ALTER TABLE tenants ADD COLUMN isolation TEXT NOT NULL DEFAULT '';
ALTER TABLE executions ADD COLUMN accelerator TEXT NOT NULL DEFAULT '';
